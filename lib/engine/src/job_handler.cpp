// The handler of one job on one lcore: its table of opcodes, the checks every rank message passes before its
// handler runs, the handlers of data (a push or init, checked and handed to the round: round.cpp) and
// requests (a rerequest or pull, answered from the round's buffers or the newest weights), and the lcore's
// 1 ms tick for the job. The other handlers: join.cpp (the handshake), ps_state.cpp (hyperparameters and
// optimizer state), forward.cpp, hub_state.cpp and hub_ps.cpp (hub forwards); what they send: tx.cpp.
#include "forwarder.hpp"
#include "job_handler.hpp"

#include <algorithm>

#include "phub/agg/nonfinite.hpp"
#include "phub/base/bytes.hpp"
#include "phub/base/mac.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/probe_reflect.hpp"
#include "phub/proto/session_packet.hpp"
#include "messages.hpp"
#include "peer_address.hpp"

namespace phub::engine {
namespace {

// Resolve the chunk and segment a data or request packet names; answers and counts what is wrong.
// Returns the chunk, or null.
Chunk* locate(const proto::Header& h, const JobPlan& plan, LcoreJob& lj, uint16_t self, Drop& why,
              proto::Status& status, uint32_t& aux, uint32_t& seg) noexcept {
  if (h.chunk_id >= plan.layout.chunk_count()) {
    why = Drop::bad_chunk;
    status = proto::Status::unknown_chunk;
    aux = plan.layout.chunk_count();
    return nullptr;
  }
  const proto::ChunkInfo& ci = plan.layout.chunk(h.chunk_id);
  if (ci.owner != plan.first_owner + self) {
    why = Drop::wrong_owner;
    status = proto::Status::bad_request;
    aux = ci.owner;
    return nullptr;
  }
  Chunk& c = lj.chunk(ci.local_index);
  const uint32_t se = plan.math.segment_elems;
  seg = h.elem_offset / se;
  if (h.elem_offset % se != 0 || seg >= c.segments || h.elem_count != segment_elems(plan.math, c, seg)) {
    why = Drop::bad_segment;
    status = proto::Status::bad_request;
    aux = se;
    return nullptr;
  }
  return &c;
}

}  // namespace

// The opcodes a job takes, each with how far it goes through handle's checks and its handler; the others
// (a worker's result, error, joined or probe_reply, sent to the server) are counted unexpected_opcode once
// they passed the checks every rank message passes.
const std::array<JobHandler::Route, proto::kOpcodeMax + 1> JobHandler::kRoutes = [] {
  std::array<Route, proto::kOpcodeMax + 1> t{};
  auto at = [&t](proto::Opcode op) -> Route& { return t[static_cast<size_t>(op)]; };
  for (uint8_t op = proto::kOpcodeMin; op <= proto::kOpcodeMax; ++op) {
    if (proto::opcode_is_hub(static_cast<proto::Opcode>(op))) t[op] = {&JobHandler::on_hub_message, Admission::hub};
  }
  at(proto::Opcode::join) = {&JobHandler::on_join, Admission::join};
  at(proto::Opcode::push) = at(proto::Opcode::init) = {&JobHandler::on_data, Admission::rank};
  at(proto::Opcode::rerequest) = at(proto::Opcode::pull) = {&JobHandler::on_rerequest, Admission::rank};
  at(proto::Opcode::hparams) = {&JobHandler::on_hparams, Admission::rank};
  at(proto::Opcode::leave) = {&JobHandler::on_leave, Admission::rank};
  at(proto::Opcode::probe_request) = {&JobHandler::on_probe, Admission::probe};
  return t;
}();

void JobHandler::handle(rte_mbuf* m, RxFrame& rx) noexcept {
  // Past the gate (Lcore::pass_gate): authentic as far as the job's mode can tell before its session opens,
  // and from a rank of this rack at an allowed source, or a hub forward of a hierarchical job.
  const auto op = static_cast<size_t>(rx.hdr.opcode);
  const Route route = op < kRoutes.size() ? kRoutes[op] : Route{};
  if (route.admission == Admission::hub || admit(rx, route.admission)) {
    if (route.handler != nullptr) {
      (this->*route.handler)(rx);
    } else {
      io.count_drop(lj, Drop::unexpected_opcode);
    }
    io.take();  // unless the handler named a drop
    if (route.admission == Admission::probe) return;  // the mbuf became the reply, or was freed
  }
  io.consume(m);
}

bool JobHandler::admit(RxFrame& rx, Admission admission) noexcept {
  // Hub forwards name a rack, not a rank: they never reach a rank's address, and are not admitted here.
  // Charged only once authentic (docs/security.md, "Charged after authentication"): a join's tag and a
  // job-key tag are checked above, a session packet's here, before it spends a token of the job's rate.
  if (admission != Admission::join && plan.gate == GateMode::sessions && !open_session(rx)) return false;
  if (!lj.admit_packet(io.now_tsc, io.snap->tsc_hz, plan.rate_per_lcore_pps)) {
    io.count_drop(lj, Drop::rate_limited);
    return false;
  }
  if ((rx.hdr.flags & proto::flag::retransmit) != 0) bump(lj.counters.retransmits_seen);
  if (admission == Admission::join) return true;
  // Packets of another epoch (old workers of a restarted job, or workers that have not seen the restart
  // yet) touch nothing: not the rounds, not the rank's address.
  if (rx.hdr.epoch != lj.epoch && admission != Admission::probe) {
    io.count_drop(lj, Drop::epoch_mismatch);
    send_error(rx, proto::Status::epoch_mismatch, lj.epoch);
    return false;
  }

  Peer& peer = lj.peer(rx.hdr.rank);
  bool answers_here = true;
  if (plan.cfg.sessions) {
    // The session proved the address it was established at (promotion set it): a packet that opened from
    // elsewhere is handled, its answers go there.
    if (!at_address(peer, rx.l2, rx.ip, rx.udp, rx.port)) {
      bump(lj.counters.addresses_kept);
      answers_here = false;
    }
  } else if (!at_address(peer, rx.l2, rx.ip, rx.udp, rx.port)) {
    // An address that proved it receives (a worker joined there) is the rank's until the holder joins again
    // from elsewhere: a packet replayed or spoofed from another MAC, IP or port is handled, but its answers
    // still go to the proven address (and what answers the sender directly is one header). An unproven
    // address follows the packets (workers that never join, NAT): it is credited anew, so a move buys the
    // new address nothing.
    if (peer.proven) {
      bump(lj.counters.addresses_kept);
      answers_here = false;
    } else {
      set_address(peer, rx.l2.src, rx.ip.src, rx.udp.src_port, rx.port, false);
    }
  }
  // Which key the answers to the rank's address are signed with follows only the packets from that address.
  if (answers_here) peer.previous_key = rx.previous_key;
  if (!peer.proven && !plan.cfg.sessions) prove_or_credit(peer, rx);
  // A probe's echo would spend what results to an unproven address need: not sent.
  return !(admission == Admission::probe && rx.credited != nullptr &&
           !within_amplification_limit(*rx.credited, rx.m->pkt_len));
}

void JobHandler::on_data(RxFrame& rx) noexcept {
  if (rx.hdr.opcode == proto::Opcode::init && rx.hdr.status != proto::Status::ok) return on_state_init(rx);
  Drop why{};
  proto::Status status{};
  uint32_t aux = 0, seg = 0;
  Chunk* cp = locate(rx.hdr, plan, lj, io.res.index, why, status, aux, seg);
  if (cp == nullptr) {
    io.count_drop(lj, why);
    return send_error(rx, status, aux);
  }
  Chunk& c = *cp;
  const JobMath& m = plan.math;

  if (rx.hdr.opcode == proto::Opcode::init) {
    if (rx.hdr.rank != 0 || !m.ps) {
      io.count_drop(lj, Drop::bad_request);
      return send_error(rx, proto::Status::bad_request, 0);
    }
    // A chunk homed at another hub: its home keeps the weights (docs/hierarchy.md, "Parameter-server jobs").
    if (hierarchical(m) && c.home != m.hub.my_rack) return hub().relay_init(rx, c, seg);
    // Answered with the segment's current weights: an acknowledgement, also when training already began.
    // Like a pull answer it is labelled with the round whose result it is (the one before the current).
    if (init_segment(m, c, seg, rx.payload.data(), rx.hdr.dtype) != InitResult::too_late) bump(lj.counters.inits);
    const auto [buffer, label] = newest_result(m, c);
    (void)send_segment(c, buffer, label, seg, rx.hdr.rank);
    return;
  }

  if (rx.hdr.dtype != m.in_dtype) {
    io.count_drop(lj, Drop::dtype_mismatch);
    return send_error(rx, proto::Status::bad_request, static_cast<uint32_t>(m.in_dtype));
  }
  // A ps push names its round's hyperparameter set in its tail and may declare the step non-finite; neither
  // means anything to an allreduce job. (Across racks the rack hub passes both on to the chunk's home.)
  const bool declared = (rx.hdr.flags & proto::flag::nonfinite) != 0;
  const bool tail = (rx.hdr.flags & proto::flag::tail) != 0;
  RoundIntent intent;
  if (declared || tail) {
    if (!m.ps) {
      io.count_drop(lj, Drop::bad_request);
      return send_error(rx, proto::Status::bad_request, 0);
    }
    intent.nonfinite = declared;
    intent.sets = &lj.hparams;
    if (tail) intent.hparams_id = load_be<uint64_t>(rx.payload.data() + rx.payload.size() - proto::kTailBytes);
    if (declared) bump(lj.counters.nonfinite_declared);
  }
  // NaN or Inf its rank did not declare: never summed into a ps job's update; refused, or taken (in ps as the
  // rank's declaration) as the job's nonfinite says. An allreduce job that passes them counts its non-finite
  // results instead (complete_segment), without a look at every push.
  if (!declared && (m.ps || plan.cfg.nonfinite == config::Nonfinite::refuse)) {
    const size_t n = rx.hdr.elem_count;
    if (agg::any_nonfinite(rx.payload.data(), m.in_dtype, n)) {
      if (plan.cfg.nonfinite == config::Nonfinite::refuse) {
        io.count_drop(lj, Drop::nonfinite_refused);
        return send_error(rx, proto::Status::nonfinite,
                          static_cast<uint32_t>(agg::first_nonfinite(rx.payload.data(), m.in_dtype, n)));
      }
      bump(lj.counters.nonfinite_passed);
      intent.nonfinite = true;
    }
  }
  take_push(rx, c, seg, intent);
}

void JobHandler::on_rerequest(RxFrame& rx) noexcept {
  const bool pull = rx.hdr.opcode == proto::Opcode::pull;
  if (pull && rx.hdr.status != proto::Status::ok) return on_state_pull(rx);
  if (pull && !plan.math.ps) {
    // Pull asks for a ps job's weights. An allreduce job has a result only for its ranks' own rounds (they
    // rerequest it): answered with a header-only error, never larger than the request.
    io.count_drop(lj, Drop::bad_request);
    return send_error(rx, proto::Status::bad_request, 0);
  }
  pull ? bump(lj.counters.pulls) : bump(lj.counters.rerequests);
  // elem_offset 0 with elem_count 0 asks for every segment of the chunk.
  const bool whole = rx.hdr.elem_offset == 0 && rx.hdr.elem_count == 0;
  proto::Header probe = rx.hdr;
  if (whole) probe.elem_count = static_cast<uint16_t>(std::min<uint32_t>(plan.math.segment_elems, UINT16_MAX));
  Drop why{};
  proto::Status status{};
  uint32_t aux = 0, seg = 0;
  Chunk* cp = locate(probe, plan, lj, io.res.index, why, status, aux, seg);
  if (cp == nullptr && !(whole && why == Drop::bad_segment)) {
    io.count_drop(lj, why);
    return send_error(rx, status, aux);
  }
  if (cp == nullptr) cp = &lj.chunk(plan.layout.chunk(rx.hdr.chunk_id).local_index);  // a one-segment chunk
  Chunk& c = *cp;
  const JobMath& m = plan.math;
  const uint32_t first = whole ? 0 : seg;
  const uint32_t last = whole ? c.segments : seg + 1;

  if (pull) {
    if (!c.has_prev && !c.advance_pending) {
      hub().ask_home_for_weights(c);
      io.count_drop(lj, Drop::not_initialized);
      return send_error(rx, proto::Status::not_initialized, 0);
    }
    // The weights after the last completed round, labelled with that round: a result labelled r is always
    // the state after round r, whichever request it answers.
    const auto [buffer, label] = newest_result(m, c);
    for (uint32_t s = first; s < last; ++s) (void)send_segment(c, buffer, label, s, rx.hdr.rank);
    return;
  }
  if (deferred(rx, c)) return;
  const int64_t d = round_delta(m, rx.hdr.round, c.round);
  if (d == -1 && c.has_prev) {
    for (uint32_t s = first; s < last; ++s) {
      if (send_segment(c, c.cur ^ 1, rx.hdr.round, s, rx.hdr.rank)) bump(lj.counters.results_resent);
    }
  } else if (d == 0) {
    for (uint32_t s = first; s < last; ++s) {
      if (!segment_done(m, c, s)) continue;  // not complete yet: the result comes when it is
      if (send_segment(c, c.cur, c.round, s, rx.hdr.rank)) bump(lj.counters.results_resent);
    }
  } else if (d > 0) {
    io.count_drop(lj, Drop::round_ahead);
    send_error(rx, proto::Status::round_ahead, c.round);
  } else {
    io.count_drop(lj, Drop::round_behind);
    send_error(rx, proto::Status::round_behind, c.round);
  }
}

void JobHandler::on_hub_message(RxFrame& rx) noexcept {
  if (rx.hdr.opcode == proto::Opcode::hub_state) return hub().on_hub_state(rx);
  hub().on_forward(rx);
}

void JobHandler::on_leave(RxFrame& rx) noexcept {
  // The process that holds the rank leaves: nothing more is sent to it. The rank stays held in the epoch (a
  // process of another run must not take over this run's rounds): a new run restarts the job. Only from the
  // rank's address: a leave replayed from elsewhere is kept out like any packet there (a session packet
  // proves its sender wherever it comes from).
  bump(lj.counters.leaves);
  Peer& peer = lj.peer(rx.hdr.rank);
  if (peer.incarnation == rx.hdr.aux && (plan.cfg.sessions || at_address(peer, rx.l2, rx.ip, rx.udp, rx.port))) {
    peer.known = false;
  }
}

void JobHandler::on_probe(RxFrame& rx) noexcept {
  // Echo the probe body back to the sender as probe_reply, rewriting the frame in place.
  rte_mbuf* m = rx.m;
  proto::Header h = proto::probe_reply_header(rx.hdr);
  h.seq = io.seq++;
  PeerSession* session = plan.cfg.sessions ? rx.session : nullptr;
  if (session != nullptr && !(session->reply == proto::ReplyAddress{rx.ip.src, rx.udp.src_port} &&
                              mac_equal(session->mac, rx.l2.src) && session->port == rx.port)) {
    // The echo is the request turned around: it would go to the sender, not the session's address. Not
    // sent (the packet was counted in addresses_kept).
    rte_pktmbuf_free(m);
    return;
  }
  proto::turn_around_udp_in_place(rx.frame, rx.l2, rx.ip, rx.udp, io.snap->ports[rx.port].mac);
  auto wire = rx.frame.subspan(rx.udp.payload_offset).first<proto::kHeaderBytes>();
  proto::write_header(h, wire);
  if (session != nullptr) {
    proto::seal_session_packet(proto::server_to_worker(session->keys), rx.frame.subspan(rx.udp.payload_offset, rx.msg.size()),
                               session->reply, session->next_tx_seq++, false);
  } else if (plan.authenticated) {
    proto::sign_header(rx.previous_key ? plan.previous_key : plan.key, wire);
  }
  rte_pktmbuf_trim(m, static_cast<uint16_t>(m->data_len - (rx.udp.payload_offset + rx.msg.size())));
  m->ol_flags = 0;
  io.queue_tx(lj, rx.port, m);
}

void JobHandler::on_tick(uint64_t now, uint64_t round_stall_tsc) noexcept {
  const bool forwards = hierarchical(plan.math);
  if (forwards) hub().on_tick();
  const uint32_t n = lj.chunk_count();
  for (uint32_t k = 0; k < std::min(n, kChunksPerTick); ++k) {
    lj.stall_cursor = lj.stall_cursor + 1 >= n ? 0 : lj.stall_cursor + 1;
    Chunk& c = lj.chunk(lj.stall_cursor);
    if (forwards && c.forward_due_tsc != 0 && now >= c.forward_due_tsc) hub().resend_forwards(c, now);
    if (round_stall_tsc == 0) continue;
    if (c.first_tsc == 0 || now - c.first_tsc < round_stall_tsc) continue;
    if (c.stall_reported_tsc != 0 && now - c.stall_reported_tsc < round_stall_tsc) continue;
    c.stall_reported_tsc = now;
    bump(lj.counters.stalls_reported);
    const uint16_t missing = first_missing_rank(plan.math, c);
    for (uint16_t rank = 0; rank < plan.math.workers; ++rank) {
      bool any = false;
      for (uint32_t seg = 0; seg < c.segments && !any; ++seg) any = contributed(plan.math, c, seg, rank);
      if (any) send_error_to(rank, c, proto::Status::round_stalled, missing);
    }
  }
}

}  // namespace phub::engine

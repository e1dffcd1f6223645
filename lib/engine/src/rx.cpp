// Receive path: classify each frame (ARP, ICMP echo, phub UDP), hand it to the owning lcore when it
// landed on the wrong queue, and run the phub opcodes on the chunks this lcore owns.
#include <rte_cycles.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "phub/agg/nonfinite.hpp"
#include "phub/base/bytes.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"
#include "phub/drivers/arp_mbuf.hpp"
#include "phub/engine/lcore.hpp"
#include "phub/proto/arp_icmp.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/probe_reflect.hpp"
#include "phub/proto/session_packet.hpp"
#include "gate.hpp"
#include "rx_frame.hpp"

namespace phub::engine {


namespace {


// Where the rank's packets now come from: results and errors go there (the cached headers are rewritten).
// A new address proves itself again, unless the way it was learned proved it (a session's keys needed the
// joined sent there).
void set_address(Peer& p, const MacAddr& mac, uint32_t ip, uint16_t udp_port, uint16_t port, bool proven) noexcept {
  p.mac = mac;
  p.ip = ip;
  p.udp_port = udp_port;
  p.port = static_cast<uint8_t>(port);
  p.known = true;
  p.l234_generation = 0;
  p.proven = proven;
  p.unproven_credit_bytes = 0;
}

// Whether the packet came from the rank's current address: MAC, IPv4, UDP port and server port.
bool at_address(const Peer& p, const proto::L2& l2, const proto::Ipv4& ip, const proto::Udp& udp,
                uint16_t port) noexcept {
  return p.known && p.ip == ip.src && p.udp_port == udp.src_port && mac_equal(p.mac, l2.src) && p.port == port;
}

// What a handed-off frame carries in its hash field (the RSS hash is not read after the gate): the job whose
// slot it holds (its id, and its index in the sender's snapshot), and the gate's verdict (passed, and under
// which key) with the low bits of the sender's snapshot generation. The owner takes the verdict under the
// same snapshot only: a reload in between (a secret changed) gates the frame again.
struct HandoffStamp {
  uint32_t job_id = 0;
  uint16_t job_index = 0;
  bool previous_key = false;
  uint8_t generation = 0;
};

void stamp(rte_mbuf* m, const HandoffStamp& h) noexcept {
  m->hash.fdir.lo = h.job_id;
  m->hash.fdir.hi = h.job_index | (h.previous_key ? 1u << 16 : 0u) | static_cast<uint32_t>(h.generation) << 24;
}

// A worker's message about one of the job's chunks: what the chunk-to-interface map sends to the chunk's port.
bool chunk_message(proto::Opcode op) noexcept {
  return op == proto::Opcode::push || op == proto::Opcode::init || op == proto::Opcode::rerequest ||
         op == proto::Opcode::pull;
}

HandoffStamp stamp_of(const rte_mbuf* m) noexcept {
  const uint32_t hi = m->hash.fdir.hi;
  return HandoffStamp{m->hash.fdir.lo, static_cast<uint16_t>(hi & 0xffff), (hi & (1u << 16)) != 0,
                      static_cast<uint8_t>(hi >> 24)};
}

}  // namespace

void Lcore::handle_frame(Rx& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept {
  outcome_ = Outcome::none;
  timing_ = --stage_countdown_ == 0;
  if (timing_) start_timing();
  route_frame(rx, m, port, s, from_ring);
  if (timing_) finish_timing(rx);
  switch (outcome_) {
    case Outcome::taken: bump(counters_.accepted); break;
    case Outcome::dropped: bump(counters_.frames_dropped); break;
    case Outcome::handed_off: break;  // redirected_out
    case Outcome::none: bump(counters_.unaccounted); break;
  }
}

void Lcore::start_timing() noexcept {
  stage_countdown_ = kStageSampleEvery;
  stage_start_ = rte_rdtsc();
  stage_parsed_ = stage_gated_ = 0;
  stage_seal_tsc_ = 0;
  stage_tx_before_ = counters_.tx_burst_tsc;
}

void Lcore::finish_timing(const Rx& rx) noexcept {
  timing_ = false;
  // Only a push this lcore summed: its header parsed and its gate passed here in this frame.
  if (stage_gated_ == 0 || outcome_ != Outcome::taken || rx.hdr.opcode != proto::Opcode::push) return;
  const uint64_t handler = rte_rdtsc() - stage_gated_;
  const uint64_t other = stage_seal_tsc_ + (counters_.tx_burst_tsc - stage_tx_before_);
  bump(counters_.stage_samples);
  bump(counters_.stage_parse_tsc, stage_parsed_ - stage_start_);
  bump(counters_.stage_gate_tsc, stage_gated_ - stage_parsed_);
  bump(counters_.stage_sum_tsc, handler > other ? handler - other : 0);
  bump(counters_.stage_seal_tsc, stage_seal_tsc_);
}

void Lcore::route_frame(Rx& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept {
  rx.m = m;
  rx.port = port;
  if (rx.port == 0xffff) {
    count_drop(Drop::not_for_us);
    rte_pktmbuf_free(m);
    return;
  }
  if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
    count_drop(Drop::rx_scattered);
    rte_pktmbuf_free(m);
    return;
  }
  rx.frame = std::span(rte_pktmbuf_mtod(m, std::byte*), m->data_len);
  const PortInfo& pi = s.ports[rx.port];

  auto drop = [&](Drop d) {
    count_drop(d);
    rte_pktmbuf_free(m);
  };
  auto malformed = [&](proto::ParseError e) {
    count_malformed(e);
    rte_pktmbuf_free(m);
  };

  // Parsed in place into rx (no copies of structs written field by field a moment before).
  if (auto e = proto::parse_l2_into(rx.frame, rx.l2)) return malformed(*e);
  if (!mac_equal(rx.l2.dst, pi.mac) && !mac_equal(rx.l2.dst, kBroadcastMac)) {
    return drop(Drop::not_for_us);
  }
  if (rx.l2.ether_type == proto::kEtherTypeArp) {
    handle_arp(rx, s);
    rte_pktmbuf_free(m);
    return;
  }
  if (rx.l2.ether_type != proto::kEtherTypeIpv4) return drop(Drop::non_ip);

  // Checksum flags count only on a port that asked for the offload (PortInfo): elsewhere they are not the PMD's.
  const bool ip_good = pi.rx_ipv4_checksum_offload &&
                       (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
  if (auto e = proto::parse_ipv4_into(rx.frame, rx.l2, !ip_good, rx.ip)) return malformed(*e);
  if (rx.ip.dst != pi.ipv4) return drop(Drop::not_for_us);
  if (rx.ip.protocol == proto::kIpProtoIcmp) return handle_icmp(m, rx, s);
  if (rx.ip.protocol != proto::kIpProtoUdp) return drop(Drop::ip_other_protocol);

  if (auto e = proto::parse_udp_into(rx.frame, rx.ip, rx.udp)) return malformed(*e);
  // The PMD's verdict when it has one (GOOD, BAD, or NONE: the data is known intact). UNKNOWN (no checksum
  // offload: af_packet, memif, ring): checked here, over the frame, one segment since the linearise above.
  // A 0 field is no checksum (IPv4) and accepted.
  const uint64_t l4 = pi.rx_udp_checksum_offload ? m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK
                                                 : RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN;
  if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD ||
      (l4 == RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN && pi.verify_udp_checksum && !proto::udp_checksum_ok(rx.frame, rx.ip))) {
    return drop(Drop::udp_checksum_bad);
  }
  const uint16_t job = s.port_to_job[rx.udp.dst_port];
  if (job == 0) return drop(Drop::unknown_port);
  const auto job_index = static_cast<uint16_t>(job - 1);
  const auto owner = static_cast<uint16_t>(rx.udp.dst_port - s.jobs[job_index]->cfg.port_base);
  const bool mine = owner == r_.index;
  if (!mine && (from_ring || owner >= r_.outbox.size() || r_.outbox[owner] == nullptr)) return drop(Drop::wrong_owner);
  rx.msg = std::span<const std::byte>(rx.frame).subspan(rx.udp.payload_offset, rx.udp.payload_bytes);
  if (auto e = proto::parse_header_into(rx.msg, rx.hdr)) return malformed(*e);
  rx.payload = rx.msg.subspan(proto::kHeaderBytes);
  if (mine) bump(counters_.rx_messages[static_cast<size_t>(rx.hdr.opcode)]);
  if (timing_) stage_parsed_ = rte_rdtsc();
  // From here on the UDP port names the job: drops are counted against it.
  if (!pass_gate(rx, s, job_index, owner, from_ring)) return rte_pktmbuf_free(m);
  if (rx.redirect_ipv4 != 0) return redirect_join(m, rx, s, job_index);
  if (!mine) return hand_off(m, s, job_index, owner, pi.port_id, rx.previous_key);
  if (timing_) stage_gated_ = rte_rdtsc();
  if (rx.port != r_.home_ports[r_.index] && s.jobs[job_index]->cfg.interface_map && chunk_message(rx.hdr.opcode)) {
    // The job's map sends this lcore's chunks to its home port; the worker sent this one elsewhere (it does not
    // follow the map: one address for every chunk). Handled all the same; a hand-off, if any, was counted too.
    bump(s.lcore_jobs[r_.index][job_index]->counters.off_interface);
  }
  handle_phub(m, rx, s, job_index);
}

bool Lcore::pass_gate(Rx& rx, const Snapshot& s, uint16_t job_index, uint16_t owner, bool from_ring) noexcept {
  LcoreJob& lj = *s.lcore_jobs[r_.index][job_index];
  rx.credited = nullptr;
  rx.session = nullptr;
  rx.redirect_ipv4 = 0;
  if (from_ring) {
    const HandoffStamp st = stamp_of(rx.m);
    if (st.generation == static_cast<uint8_t>(s.generation)) {
      // The sender's verdict: the tag or handshake is not checked again. A join's payload is read again (its
      // form was checked with its handshake).
      rx.previous_key = st.previous_key;
      if (rx.hdr.opcode != proto::Opcode::join) return true;
      if (auto j = proto::parse_join_payload(rx.payload)) {
        rx.join = *j;
        return true;
      }
      count_drop(lj, Drop::bad_request);
      return false;
    }
  }
  GateSite site;
  if (owner != r_.index) {
    const uint16_t home = owner < r_.home_ports.size() ? r_.home_ports[owner] : rx.port;
    site = GateSite{.owner = false,
                    .owner_board = s.lcore_jobs[owner][job_index]->session_board.get(),
                    .owner_home_ipv4 = s.jobs[job_index]->cfg.interface_map && home != rx.port ? s.ports[home].ipv4 : 0};
  }
  const GateVerdict v = gate_packet(GatePacket{rx.hdr, rx.msg, rx.ip.src}, *s.jobs[job_index], now_tsc_, site,
                                    [&s](uint32_t id) { return s.job_by_id(id) >= 0; });
  if (!v.passed()) {
    count_drop(lj, v.drop);
    return false;
  }
  rx.previous_key = v.previous_key;
  rx.join = v.join;
  if (v.answer == GateAnswer::redirect) rx.redirect_ipv4 = v.redirect_ipv4;
  return true;
}

void Lcore::redirect_join(rte_mbuf* m, const Rx& rx, const Snapshot& s, uint16_t job_index) noexcept {
  // Past the gate: the join's tag (a job with a secret) and source are checked. The answer names the owner's
  // home address and nothing of the owner's state, comes from the port the join was sent to (the owner's
  // UDP port at this address, which the worker knows it by), is as long as the join, and is charged to this
  // lcore's share of the job's rate as the join would have been at the owner.
  LcoreJob& lj = *s.lcore_jobs[r_.index][job_index];
  const JobPlan& plan = *s.jobs[job_index];
  if (!lj.admit_packet(now_tsc_, s.tsc_hz, plan.rate_per_lcore_pps)) {
    count_drop(lj, Drop::rate_limited);
    return rte_pktmbuf_free(m);
  }
  bump(counters_.rx_messages[static_cast<size_t>(proto::Opcode::join)]);
  proto::JoinedPayload jp;
  jp.worker_nonce = rx.join.worker_nonce;
  jp.reply = proto::ReplyAddress{rx.ip.src, rx.udp.src_port};
  jp.options = proto::session_option::redirect;
  proto::Header a;
  a.opcode = proto::Opcode::joined;
  a.dtype = plan.math.in_dtype;
  a.job_id = plan.cfg.id;
  a.rank = rx.hdr.rank;
  a.epoch = rx.hdr.epoch;
  a.chunk_id = rx.redirect_ipv4;
  if (send_joined(rx, plan, lj, a, jp)) bump(lj.counters.joins_redirected);
  take();
  rte_pktmbuf_free(m);
}

void Lcore::hand_off(rte_mbuf* m, const Snapshot& s, uint16_t job_index, uint16_t owner, uint16_t port_id,
                     bool previous_key) noexcept {
  // Each job may hold only its share of the slots of the rings towards the owner: a flood of one job is
  // dropped against that job, and the other jobs' frames always find a slot.
  LcoreJob& at_owner = *s.lcore_jobs[owner][job_index];
  const uint32_t share = __atomic_load_n(&at_owner.handoff_share_slots, __ATOMIC_RELAXED);
  if (at_owner.handoff_held.fetch_add(1, std::memory_order_relaxed) >= share) {
    at_owner.handoff_held.fetch_sub(1, std::memory_order_relaxed);
    count_drop(*s.lcore_jobs[r_.index][job_index], Drop::handoff_share_full);
    return rte_pktmbuf_free(m);
  }
  m->port = port_id;  // some PMDs (net_ring) leave the sender's port id here
  stamp(m, HandoffStamp{s.jobs[job_index]->cfg.id, job_index, previous_key, static_cast<uint8_t>(s.generation)});
  if (rte_ring_sp_enqueue(r_.outbox[owner], m) != 0) {
    at_owner.handoff_held.fetch_sub(1, std::memory_order_relaxed);
    count_drop(Drop::ring_full);
    return rte_pktmbuf_free(m);
  }
  bump(counters_.redirected_out);
  settle(Outcome::handed_off);
}

void Lcore::give_back_handoff_slot(const rte_mbuf* m, const Snapshot& s) noexcept {
  // The job by the index the sender saw, else by id (a reload between the two snapshots moved it). A job
  // gone since holds nothing here; one whose LcoreJob was replaced starts from 0, hence no underflow.
  const HandoffStamp st = stamp_of(m);
  int j = st.job_index < s.jobs.size() && s.jobs[st.job_index]->cfg.id == st.job_id ? static_cast<int>(st.job_index)
                                                                                     : s.job_by_id(st.job_id);
  if (j < 0) return;
  std::atomic<uint32_t>& held = s.lcore_jobs[r_.index][static_cast<size_t>(j)]->handoff_held;
  uint32_t v = held.load(std::memory_order_relaxed);
  while (v != 0 && !held.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) {
  }
}

bool Lcore::may_answer(uint16_t port, const MacAddr& src_mac, uint32_t src_ip, const Snapshot& s) noexcept {
  const PortInfo& pi = s.ports[port];
  if ((src_mac[0] & 0x01) != 0 || src_ip == 0 || (src_ip >> 28) == 0xe || src_ip == 0xffffffffu ||
      (pi.ipv4_broadcast != 0 && src_ip == pi.ipv4_broadcast)) {
    count_drop(Drop::reply_source_refused);
    return false;
  }
  const config::Limits& l = s.config->limits;
  if (l.arp_icmp_per_s == 0) return true;
  AnswerBucket& b = answers_[port];
  const double burst = l.arp_icmp_burst;
  if (b.last_tsc == 0) {
    b.tokens = burst;
  } else if (now_tsc_ > b.last_tsc) {
    b.tokens = std::min(burst, b.tokens + static_cast<double>(now_tsc_ - b.last_tsc) * l.arp_icmp_per_s /
                                              static_cast<double>(s.tsc_hz));
  }
  b.last_tsc = now_tsc_ != 0 ? now_tsc_ : 1;
  if (b.tokens < 1.0) {
    count_drop(Drop::reply_rate_limited);
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

void Lcore::handle_arp(const Rx& rx, const Snapshot& s) noexcept {
  auto arp = proto::parse_arp(rx.frame, rx.l2);
  if (!arp) {
    count_malformed(arp.error());
    return;
  }
  const PortInfo& pi = s.ports[rx.port];
  // A peer hub's MAC is learned from an ARP reply while it is unknown (the answer to this hub's request);
  // a gratuitous or unsolicited claim later changes nothing. Verified forwards keep it current.
  if (arp->op == proto::ArpOp::reply && arp->target_ip == pi.ipv4) {
    learn_hub_mac(s, arp->sender_ip, arp->sender_mac);
    return take();
  }
  if (arp->op != proto::ArpOp::request || arp->target_ip != pi.ipv4) return count_drop(Drop::not_for_us);
  // The answer goes to the sender hardware address: neither it nor the frame's source may be a group.
  if ((arp->sender_mac[0] & 0x01) != 0) return count_drop(Drop::reply_source_refused);
  if (!may_answer(rx.port, rx.l2.src, arp->sender_ip, s)) return;
  rte_mbuf* r = drivers::alloc_arp_reply(r_.hdr_pool, *arp, pi.mac, pi.ipv4);
  if (r == nullptr) return count_drop(Drop::no_mbuf);
  bump(counters_.arp_replies);
  take();
  tx_[rx.port].add(r, counters_);
}

void Lcore::handle_icmp(rte_mbuf* m, Rx& rx, const Snapshot& s) noexcept {
  auto echo = proto::parse_icmp_echo_request(rx.frame, rx.ip);
  if (!echo) {
    count_malformed(echo.error());
    rte_pktmbuf_free(m);
    return;
  }
  if (!may_answer(rx.port, rx.l2.src, rx.ip.src, s)) {
    rte_pktmbuf_free(m);
    return;
  }
  proto::icmp_echo_reply_in_place(rx.frame, rx.l2, rx.ip, *echo);
  m->ol_flags = 0;
  bump(counters_.icmp_replies);
  take();
  tx_[rx.port].add(m, counters_);
}

void Lcore::handle_phub(rte_mbuf* m, Rx& rx, const Snapshot& s, uint16_t job_index) noexcept {
  // Past the gate (pass_gate): authentic as far as the job's mode can tell before its session opens, and
  // from a rank of this rack at an allowed source, or a hub forward of a hierarchical job.
  LcoreJob& lj = *s.lcore_jobs[r_.index][job_index];
  auto drop = [&](Drop d) {
    count_drop(lj, d);
    rte_pktmbuf_free(m);
  };
  const JobPlan& plan = *s.jobs[job_index];
  // Hub forwards name a rack, not a rank: they never reach a rank's address.
  if (proto::opcode_is_hub(rx.hdr.opcode)) {
    if (rx.hdr.opcode == proto::Opcode::hub_state) {
      on_hub_state(rx, plan, lj);
    } else {
      on_forward(rx, plan, lj);
    }
    take();  // unless the handler named a drop
    return consume(m);
  }
  // Charged only once authentic (docs/security.md, "Charged after authentication"): a join's tag and a
  // job-key tag are checked above, a session packet's here, before it spends a token of the job's rate.
  const uint64_t now = now_tsc_;
  if (rx.hdr.opcode != proto::Opcode::join && plan.gate == GateMode::sessions && !open_session(rx, plan, lj)) {
    return consume(m);
  }
  if (!lj.admit_packet(now, s.tsc_hz, plan.rate_per_lcore_pps)) return drop(Drop::rate_limited);
  if ((rx.hdr.flags & proto::flag::retransmit) != 0) bump(lj.counters.retransmits_seen);
  if (rx.hdr.opcode == proto::Opcode::join) {
    on_join(rx, plan, lj);
    take();
    return consume(m);
  }
  // Packets of another epoch (old workers of a restarted job, or workers that have not seen the restart
  // yet) touch nothing: not the rounds, not the rank's address.
  if (rx.hdr.epoch != lj.epoch && rx.hdr.opcode != proto::Opcode::probe_request) {
    count_drop(lj, Drop::epoch_mismatch);
    send_error(rx, plan, lj, proto::Status::epoch_mismatch, lj.epoch);
    return consume(m);
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
  if (!peer.proven && !plan.cfg.sessions) prove_or_credit(peer, rx, plan, lj, s);
  if (rx.hdr.opcode == proto::Opcode::probe_request && rx.credited != nullptr &&
      !within_amplification_limit(lj, *rx.credited, rx.m->pkt_len)) {
    return consume(m);  // the echo would spend what results to the address need: not sent
  }

  switch (rx.hdr.opcode) {
    case proto::Opcode::push:
    case proto::Opcode::init:
      on_data(rx, plan, lj, now);
      break;
    case proto::Opcode::rerequest:
    case proto::Opcode::pull:
      on_rerequest(rx, plan, lj);
      break;
    case proto::Opcode::hparams:
      on_hparams(rx, plan, lj);
      break;
    case proto::Opcode::leave:
      // The process that holds the rank leaves: nothing more is sent to it. The rank stays held in the
      // epoch (a process of another run must not take over this run's rounds): a new run restarts the job.
      // Only from the rank's address: a leave replayed from elsewhere is kept out like any packet there.
      bump(lj.counters.leaves);
      // (A session packet proves its sender wherever it comes from.)
      if (peer.incarnation == rx.hdr.aux && (plan.cfg.sessions || at_address(peer, rx.l2, rx.ip, rx.udp, rx.port))) {
        peer.known = false;
      }
      break;
    case proto::Opcode::probe_request:
      on_probe(m, rx, lj);
      take();
      return;  // the mbuf became the reply
    default:
      count_drop(lj, Drop::unexpected_opcode);
      break;
  }
  take();
  consume(m);
}

// Resolve the chunk and segment a data or request packet names; answers and counts what is wrong.
// Returns the chunk, or null.
static Chunk* locate(const proto::Header& h, const JobPlan& plan, LcoreJob& lj, uint16_t self, Drop& why,
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

void Lcore::on_data(Rx& rx, const JobPlan& plan, LcoreJob& lj, uint64_t now) noexcept {
  if (rx.hdr.opcode == proto::Opcode::init && rx.hdr.status != proto::Status::ok) return on_state_init(rx, plan, lj);
  Drop why{};
  proto::Status status{};
  uint32_t aux = 0, seg = 0;
  Chunk* cp = locate(rx.hdr, plan, lj, r_.index, why, status, aux, seg);
  if (cp == nullptr) {
    count_drop(lj, why);
    return send_error(rx, plan, lj, status, aux);
  }
  Chunk& c = *cp;
  const JobMath& m = plan.math;

  if (rx.hdr.opcode == proto::Opcode::init) {
    if (rx.hdr.rank != 0 || !m.ps) {
      count_drop(lj, Drop::bad_request);
      return send_error(rx, plan, lj, proto::Status::bad_request, 0);
    }
    // A chunk homed at another hub: its home keeps the weights (docs/hierarchy.md, "Parameter-server jobs").
    if (hierarchical(m) && c.home != m.hub.my_rack) return relay_init(rx, plan, lj, c, seg);
    // Answered with the segment's current weights: an acknowledgement, also when training already began.
    // Like a pull answer it is labelled with the round whose result it is (the one before the current).
    if (init_segment(m, c, seg, rx.payload.data(), rx.hdr.dtype) != InitResult::too_late) bump(lj.counters.inits);
    const auto [buffer, label] = newest_result(m, c);
    (void)send_segment(plan, lj, c, buffer, label, seg, rx.hdr.rank);
    return;
  }

  if (rx.hdr.dtype != m.in_dtype) {
    count_drop(lj, Drop::dtype_mismatch);
    return send_error(rx, plan, lj, proto::Status::bad_request, static_cast<uint32_t>(m.in_dtype));
  }
  // A ps push names its round's hyperparameter set in its tail and may declare the step non-finite; neither
  // means anything to an allreduce job. (Across racks the rack hub passes both on to the chunk's home.)
  const bool declared = (rx.hdr.flags & proto::flag::nonfinite) != 0;
  const bool tail = (rx.hdr.flags & proto::flag::tail) != 0;
  RoundIntent intent;
  if (declared || tail) {
    if (!m.ps) {
      count_drop(lj, Drop::bad_request);
      return send_error(rx, plan, lj, proto::Status::bad_request, 0);
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
        count_drop(lj, Drop::nonfinite_refused);
        return send_error(rx, plan, lj, proto::Status::nonfinite,
                          static_cast<uint32_t>(agg::first_nonfinite(rx.payload.data(), m.in_dtype, n)));
      }
      bump(lj.counters.nonfinite_passed);
      intent.nonfinite = true;
    }
  }
  if (deferred(rx, plan, lj, c)) return;
  const bool opens_round = c.first_tsc == 0;
  if (opens_round && lj.draining && round_delta(m, rx.hdr.round, c.round) == 0) {
    count_drop(lj, Drop::draining);
    return send_error(rx, plan, lj, proto::Status::draining, c.round);
  }
  if (lj.capture != nullptr) capture_segment(plan, lj, c, seg);  // before the next round can change it
  const PushResult result = contribute(m, c, rx.hdr.rank, rx.hdr.round, seg, rx.payload.data(), now, intent);
  if (opens_round && c.first_tsc != 0) bump(lj.open_rounds);
  // Counted, or a duplicate answered again: taken, whatever sending the results then meets.
  if (push_taken(result)) take();
  switch (result) {
    case PushResult::accepted:
      bump(lj.counters.pushes);
      bump(lj.counters.push_payload_bytes, rx.payload.size());
      break;
    case PushResult::segment_complete:
      bump(lj.counters.pushes);
      bump(lj.counters.push_payload_bytes, rx.payload.size());
      complete_segment(plan, lj, c, seg);
      break;
    case PushResult::rack_complete:
      bump(lj.counters.pushes);
      bump(lj.counters.push_payload_bytes, rx.payload.size());
      send_partial(plan, lj, c, seg, false);
      break;
    case PushResult::duplicate:
      bump(lj.counters.duplicates);
      break;
    case PushResult::duplicate_complete:
      bump(lj.counters.duplicates);
      if (send_segment(plan, lj, c, c.cur, c.round, seg, rx.hdr.rank)) bump(lj.counters.results_resent);
      break;
    case PushResult::previous_round:
      bump(lj.counters.duplicates);
      if (send_segment(plan, lj, c, c.cur ^ 1, rx.hdr.round, seg, rx.hdr.rank)) bump(lj.counters.results_resent);
      break;
    case PushResult::ahead:
      count_drop(lj, Drop::round_ahead);
      send_error(rx, plan, lj, proto::Status::round_ahead, c.round);
      break;
    case PushResult::behind:
      count_drop(lj, Drop::round_behind);
      send_error(rx, plan, lj, proto::Status::round_behind, c.round);
      break;
    case PushResult::not_initialized:
      ask_home_for_weights(plan, lj, c);
      count_drop(lj, Drop::not_initialized);
      send_error(rx, plan, lj, proto::Status::not_initialized, 0);
      break;
    case PushResult::bad_round:
      count_drop(lj, Drop::bad_request);
      send_error(rx, plan, lj, proto::Status::bad_request, m.round_modulus);
      break;
    case PushResult::hparams_unknown:
      count_drop(lj, Drop::hparams_unknown);
      send_error(rx, plan, lj, proto::Status::hparams_unknown, 0);
      break;
    case PushResult::hparams_mismatch:
      count_drop(lj, Drop::hparams_mismatch);
      send_error(rx, plan, lj, proto::Status::hparams_mismatch, 0);
      break;
  }
}

bool Lcore::deferred(const Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept {
  if (!c.advance_pending || try_advance(plan, lj, c)) return false;
  if (round_delta(plan.math, rx.hdr.round, c.round) == 0) return false;  // answered from the round's buffer
  // The next round waits (its worker resends); an older one is a late copy every rank is past (the round
  // completed, so every rank held the round before it): neither gets an answer.
  count_drop(lj, Drop::advance_pending);
  return true;
}

void Lcore::on_rerequest(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept {
  const bool pull = rx.hdr.opcode == proto::Opcode::pull;
  if (pull && rx.hdr.status != proto::Status::ok) return on_state_pull(rx, plan, lj);
  if (pull && !plan.math.ps) {
    // Pull asks for a ps job's weights. An allreduce job has a result only for its ranks' own rounds (they
    // rerequest it): answered with a header-only error, never larger than the request.
    count_drop(lj, Drop::bad_request);
    return send_error(rx, plan, lj, proto::Status::bad_request, 0);
  }
  pull ? bump(lj.counters.pulls) : bump(lj.counters.rerequests);
  // elem_offset 0 with elem_count 0 asks for every segment of the chunk.
  const bool whole = rx.hdr.elem_offset == 0 && rx.hdr.elem_count == 0;
  proto::Header probe = rx.hdr;
  if (whole) probe.elem_count = static_cast<uint16_t>(std::min<uint32_t>(plan.math.segment_elems, UINT16_MAX));
  Drop why{};
  proto::Status status{};
  uint32_t aux = 0, seg = 0;
  Chunk* cp = locate(probe, plan, lj, r_.index, why, status, aux, seg);
  if (cp == nullptr && !(whole && why == Drop::bad_segment)) {
    count_drop(lj, why);
    return send_error(rx, plan, lj, status, aux);
  }
  if (cp == nullptr) cp = &lj.chunk(plan.layout.chunk(rx.hdr.chunk_id).local_index);  // a one-segment chunk
  Chunk& c = *cp;
  const JobMath& m = plan.math;
  const uint32_t first = whole ? 0 : seg;
  const uint32_t last = whole ? c.segments : seg + 1;

  if (pull) {
    if (!c.has_prev && !c.advance_pending) {
      ask_home_for_weights(plan, lj, c);
      count_drop(lj, Drop::not_initialized);
      return send_error(rx, plan, lj, proto::Status::not_initialized, 0);
    }
    // The weights after the last completed round, labelled with that round: a result labelled r is always
    // the state after round r, whichever request it answers.
    const auto [buffer, label] = newest_result(m, c);
    for (uint32_t s = first; s < last; ++s) (void)send_segment(plan, lj, c, buffer, label, s, rx.hdr.rank);
    return;
  }
  if (deferred(rx, plan, lj, c)) return;
  const int64_t d = round_delta(m, rx.hdr.round, c.round);
  if (d == -1 && c.has_prev) {
    for (uint32_t s = first; s < last; ++s) {
      if (send_segment(plan, lj, c, c.cur ^ 1, rx.hdr.round, s, rx.hdr.rank)) bump(lj.counters.results_resent);
    }
  } else if (d == 0) {
    for (uint32_t s = first; s < last; ++s) {
      if (!segment_done(m, c, s)) continue;  // not complete yet: the result comes when it is
      if (send_segment(plan, lj, c, c.cur, c.round, s, rx.hdr.rank)) bump(lj.counters.results_resent);
    }
  } else if (d > 0) {
    count_drop(lj, Drop::round_ahead);
    send_error(rx, plan, lj, proto::Status::round_ahead, c.round);
  } else {
    count_drop(lj, Drop::round_behind);
    send_error(rx, plan, lj, proto::Status::round_behind, c.round);
  }
}

void Lcore::on_join(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept {
  bump(lj.counters.joins);
  const proto::Header& h = rx.hdr;
  const uint32_t incarnation = h.aux;  // a random number the worker process drew at start (never 0)
  Peer& p = lj.peer(h.rank);
  // A first join claims nothing: it is answered with a challenge (docs/protocol.md, "The handshake"). Only a
  // confirm that carries the challenge this lcore sent to its source in the job's current epoch (so no join
  // recorded in an earlier epoch or server run, nor one replayed from elsewhere) takes the rank or starts an
  // epoch.
  bool confirmed = false;
  if ((h.flags & proto::flag::epoch_start) != 0 && h.rank != 0) {
    count_drop(lj, Drop::bad_request);
    return send_error(rx, plan, lj, proto::Status::bad_request, 0);
  }
  // The challenge of now: what a confirm must carry, and the answer to anything not confirmed (the epoch
  // changes only with a confirm taken, whose answer carries its own challenge).
  const proto::SessionNonce challenge = challenge_for(rx, plan, lj.epoch);
  if (rx.join.confirm) {
    if (incarnation == 0) {
      count_drop(lj, Drop::bad_request);  // a query confirms nothing
      return send_error(rx, plan, lj, proto::Status::bad_request, 0);
    }
    if (sodium_memcmp(rx.join.server_nonce.data(), challenge.data(), proto::kSessionNonceBytes) != 0) {
      // Answered below with the challenge of now. A challenge of the epoch just replaced is the race of every
      // run's start (a rank's handshake crossing its rank 0's epoch start), not a drop; any other is stale.
      const auto previous = static_cast<uint16_t>(lj.epoch - 1);
      if (sodium_memcmp(rx.join.server_nonce.data(), challenge_for(rx, plan, previous).data(),
                        proto::kSessionNonceBytes) == 0) {
        bump(lj.counters.joins_rechallenged);
      } else {
        count_drop(lj, Drop::join_stale);
      }
    } else {
      if ((h.flags & proto::flag::epoch_start) != 0) {
        // Rank 0 of a new run restarts the job in the epoch after the current one. A confirm that names any
        // other epoch changes nothing; the answer tells the sender where the job stands.
        if (h.epoch == static_cast<uint16_t>(lj.epoch + 1) && p.incarnation != incarnation) {
          start_epoch(plan, lj, h.epoch, (h.flags & proto::flag::fresh_weights) != 0);
          p.incarnation = incarnation;
        }
      } else if (p.incarnation == 0) {
        // A rank joins the current epoch once: a second process claiming the rank (a worker of a new run,
        // before its rank 0 restarted the job) is told who holds it and waits for the restart.
        p.incarnation = incarnation;
        if (h.rank == 0 && hierarchical(plan.math)) hub_state_changed(lj);  // peers learn the holder
      }
      if (p.incarnation == incarnation) {
        if (!take_confirm(rx, plan, lj, p)) return;  // an earlier confirm of the holder, replayed: no answer
        confirmed = true;
      }
    }
  }
  proto::JoinedPayload jp;
  jp.worker_nonce = rx.join.worker_nonce;
  jp.reply = proto::ReplyAddress{rx.ip.src, rx.udp.src_port};
  // A confirm taken is answered with its own challenge (an epoch start changed the epoch it was made in);
  // everything else with the challenge of now.
  jp.server_nonce = confirmed ? rx.join.server_nonce : challenge;
  jp.options = confirmed ? proto::session_option::confirmed : uint8_t{0};
  if (plan.cfg.sessions) {
    jp.options |= static_cast<uint8_t>(proto::session_option::session |
                                       (plan.cfg.payload_mac ? proto::session_option::payload_mac : 0));
  }
  proto::Header a;
  a.opcode = proto::Opcode::joined;
  a.dtype = plan.math.in_dtype;
  a.job_id = plan.cfg.id;
  a.rank = h.rank;
  a.epoch = lj.epoch;
  a.round = lj.epoch_first_round;           // the epoch's first round
  a.aux = p.incarnation;                    // who holds the rank in this epoch
  a.elem_offset = lj.peer(0).incarnation;   // who holds rank 0: the run the epoch belongs to
  // The chunk-to-interface map: the address of this lcore's home port, where the rank sends its chunks (and its
  // joins) from now on; 0 without the map (the address the join reached).
  a.chunk_id = plan.cfg.interface_map ? snap_->ports[r_.home_ports[r_.index]].ipv4 : 0;
  // The address cookie of the join's source: the worker carries it back in every push, init, rerequest
  // and pull. Only the address's owner receives it.
  a.crc32c = proto::address_cookie(snap_->cookie_key, plan.cfg.id, h.rank, rx.ip.src, rx.udp.src_port);
  send_joined(rx, plan, lj, a, jp);
}

proto::SessionNonce Lcore::challenge_for(const Rx& rx, const JobPlan& plan, uint16_t epoch) const noexcept {
  proto::ChallengeContext c;
  c.job_id = plan.cfg.id;
  c.lcore_index = r_.index;
  c.rank = rx.hdr.rank;
  c.epoch = epoch;
  c.incarnation = rx.hdr.aux;
  c.source = proto::ReplyAddress{rx.ip.src, rx.udp.src_port};
  c.worker_nonce = rx.join.worker_nonce;
  return proto::join_challenge(snap_->challenge_key, c);
}

bool Lcore::take_confirm(const Rx& rx, const JobPlan& plan, LcoreJob& lj, Peer& p) noexcept {
  const proto::Header& h = rx.hdr;
  if (!plan.cfg.sessions) {
    // The confirm sets the holder's address, unless the address is proven and this confirm is not later than
    // the one that set it (overtaken by a later one): then it changes nothing, and its answer goes to its
    // sender as any join's. The challenge proved that the sender receives at its address.
    const bool fresh = !p.proven || static_cast<int32_t>(h.seq - p.join_seq) > 0;
    if (fresh) {
      if (!at_address(p, rx.l2, rx.ip, rx.udp, rx.port)) set_address(p, rx.l2.src, rx.ip.src, rx.udp.src_port, rx.port, false);
      p.join_seq = h.seq;
      p.previous_key = rx.previous_key;
    } else if (!at_address(p, rx.l2, rx.ip, rx.udp, rx.port)) {
      bump(lj.counters.addresses_kept);
    }
    return true;
  }
  PeerSession& cur = p.current;
  if (cur.valid && cur.incarnation == h.aux) {
    // A resend of the confirm that made the current session (same nonces): the same answer, nothing new.
    if (cur.worker_nonce == rx.join.worker_nonce && cur.server_nonce == rx.join.server_nonce) return true;
    // Another confirm of the same process replaces it only when it is later (its seq).
    if (static_cast<int32_t>(h.seq - cur.join_seq) <= 0) {
      count_drop(lj, Drop::replayed);
      return false;
    }
  }
  PeerSession n;
  n.reply = proto::ReplyAddress{rx.ip.src, rx.udp.src_port};
  n.mac = rx.l2.src;
  n.port = static_cast<uint8_t>(rx.port);
  n.worker_nonce = rx.join.worker_nonce;
  n.server_nonce = rx.join.server_nonce;
  n.incarnation = h.aux;
  n.join_seq = h.seq;
  proto::SessionContext ctx;
  ctx.rank = h.rank;
  ctx.incarnation = h.aux;
  ctx.lcore_index = r_.index;
  ctx.worker_nonce = n.worker_nonce;
  ctx.server_nonce = n.server_nonce;
  n.keys = proto::derive_session_keys(rx.previous_key ? plan.previous_key : plan.key, ctx);
  n.valid = true;
  p.former = cur;
  cur = n;
  if (lj.session_board) lj.session_board->publish(h.rank, p.current, p.former);
  // The challenge reached the source only there: the session's address is proven.
  set_address(p, cur.mac, cur.reply.ipv4, cur.reply.udp_port, cur.port, true);
  p.previous_key = rx.previous_key;
  bump(lj.counters.sessions_established);
  return true;
}

namespace {

Drop drop_for(proto::SessionVerdict v) noexcept {
  switch (v) {
    case proto::SessionVerdict::replayed: return Drop::replayed;
    case proto::SessionVerdict::bad_mac: return Drop::bad_mac;
    case proto::SessionVerdict::mac_missing: return Drop::mac_missing;
    case proto::SessionVerdict::ok:
    case proto::SessionVerdict::bad_tag: break;
  }
  return Drop::bad_tag;
}

}  // namespace

bool Lcore::open_session(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept {
  Peer& p = lj.peer(rx.hdr.rank);
  const bool require_mac = plan.cfg.payload_mac && proto::session_opcode_has_mac(rx.hdr.opcode);
  using V = proto::SessionVerdict;
  // A session's window is checked before its tag: replayed under one session says nothing of
  // another (a new session starts again at 1, below the old one's window). Only bad_mac and mac_missing
  // prove the packet is that session's.
  auto inconclusive = [](V x) { return x == V::bad_tag || x == V::replayed; };
  V v = V::bad_tag;
  if (p.current.valid) {
    v = proto::open_session_packet(proto::worker_to_server(p.current.keys), p.current.window, rx.msg, p.current.reply,
                                   require_mac);
    if (v == V::ok) {
      rx.session = &p.current;
      const uint32_t high = proto::seq_high(p.current.window.top());
      if (high != p.current.published_high && lj.session_board) {
        p.current.published_high = high;
        lj.session_board->publish_high(rx.hdr.rank, false, high);
      }
      return true;
    }
  }
  if (inconclusive(v) && p.former.valid) {
    const V fv = proto::open_session_packet(proto::worker_to_server(p.former.keys), p.former.window, rx.msg,
                                            p.former.reply, require_mac);
    if (fv == V::ok) {
      // A worker of the session a later join replaced: told only that the job moved to another epoch.
      if (rx.hdr.epoch != lj.epoch && rx.hdr.opcode != proto::Opcode::probe_request) {
        count_drop(lj, Drop::epoch_mismatch);
        rx.session = &p.former;
        send_error(rx, plan, lj, proto::Status::epoch_mismatch, lj.epoch);
        rx.session = nullptr;
      } else {
        count_drop(lj, Drop::session_replaced);
      }
      return false;
    }
    if (!inconclusive(fv)) v = fv;
  }
  count_drop(lj, !p.current.valid && !p.former.valid ? Drop::no_session : drop_for(v));
  return false;
}

void Lcore::prove_or_credit(Peer& peer, Rx& rx, const JobPlan& plan, LcoreJob& lj, const Snapshot& s) noexcept {
  if (proto::opcode_carries_cookie(rx.hdr.opcode) && rx.hdr.aux != 0 &&
      rx.hdr.aux == proto::address_cookie(s.cookie_key, plan.cfg.id, rx.hdr.rank, rx.ip.src, rx.udp.src_port)) {
    peer.proven = true;
    peer.unproven_credit_bytes = 0;
    bump(lj.counters.addresses_proven);
    return;
  }
  peer.unproven_credit_bytes += rx.m->pkt_len;
  rx.credited = &peer;
}

void Lcore::start_epoch(const JobPlan& plan, LcoreJob& lj, uint16_t epoch, bool fresh_weights) noexcept {
  for (uint32_t i = 0; i < lj.chunk_count(); ++i) {
    Chunk& c = lj.chunk(i);
    if (c.first_tsc != 0) close_round(lj);
    // restart_chunk may rewrite out[cur ^ 1] (a ps job's weights). If a transmit still points at it and no
    // spare is free, that copy goes out with the new data under the old epoch's header, which every
    // worker of the new epoch drops (the epoch is in every header): harmless, unlike within an epoch.
    (void)release_previous(lj, c);
    restart_chunk(plan.math, c, fresh_weights);
  }
  if (lj.capture != nullptr) {
    lj.capture->failed.store(true, std::memory_order_relaxed);  // its round is of the epoch that ends
    detach_capture(lj);
  }
  __atomic_store_n(&lj.rounds_in_epoch, false, __ATOMIC_RELAXED);
  lj.epoch_first_round = 0;
  lj.fresh_weights_epoch = fresh_weights;
  if (fresh_weights) __atomic_store_n(&lj.fresh_weights_starts, lj.fresh_weights_starts + 1, __ATOMIC_RELEASE);
  lj.forget_peers();
  if (hierarchical(plan.math)) hub_state_changed(lj);  // the other hubs take the epoch from here
  __atomic_store_n(&lj.epoch, epoch, __ATOMIC_RELAXED);
  bump(lj.counters.epochs_started);
}

void Lcore::on_probe(rte_mbuf* m, Rx& rx, LcoreJob& lj) noexcept {
  // Echo the probe body back to the sender as probe_reply, rewriting the frame in place.
  proto::Header h = proto::probe_reply_header(rx.hdr);
  h.seq = seq_++;
  const JobPlan& plan = *snap_->jobs[snap_->port_to_job[rx.udp.dst_port] - 1];
  PeerSession* session = plan.cfg.sessions ? rx.session : nullptr;
  if (session != nullptr && !(session->reply == proto::ReplyAddress{rx.ip.src, rx.udp.src_port} &&
                              mac_equal(session->mac, rx.l2.src) && session->port == rx.port)) {
    // The echo is the request turned around: it would go to the sender, not the session's address. Not
    // sent (the packet was counted in addresses_kept).
    rte_pktmbuf_free(m);
    return;
  }
  proto::turn_around_udp_in_place(rx.frame, rx.l2, rx.ip, rx.udp, snap_->ports[rx.port].mac);
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
  queue_tx(lj, rx.port, m);
}

}  // namespace phub::engine

// A job's handshake on one lcore (docs/protocol.md, "The handshake"): a join answered with its challenge, a
// confirm that takes the rank (its session, its address, a new epoch), the redirect of a join that reached the
// wrong port, a session packet opened, an unproven address proven or credited.
#include <rte_cycles.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "phub/agg/nonfinite.hpp"
#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/probe_reflect.hpp"
#include "phub/proto/session_packet.hpp"
#include "forwarder.hpp"
#include "job_handler.hpp"
#include "peer_address.hpp"

namespace phub::engine {

void JobHandler::redirect_join(rte_mbuf* m, const RxFrame& rx) noexcept {
  // Past the gate: the join's tag (a job with a secret) and source are checked. The answer names the owner's
  // home address and nothing of the owner's state, comes from the port the join was sent to (the owner's
  // UDP port at this address, which the worker knows it by), is as long as the join, and is charged to this
  // lcore's share of the job's rate as the join would have been at the owner.
  if (!lj.admit_packet(io.now_tsc, io.snap->tsc_hz, plan.rate_per_lcore_pps)) {
    io.count_drop(lj, Drop::rate_limited);
    return rte_pktmbuf_free(m);
  }
  bump(io.counters.rx_messages[static_cast<size_t>(proto::Opcode::join)]);
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
  if (send_joined(rx, a, jp)) bump(lj.counters.joins_redirected);
  io.take();
  rte_pktmbuf_free(m);
}

void JobHandler::on_join(RxFrame& rx) noexcept {
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
    io.count_drop(lj, Drop::bad_request);
    return send_error(rx, proto::Status::bad_request, 0);
  }
  // The challenge of now: what a confirm must carry, and the answer to anything not confirmed (the epoch
  // changes only with a confirm taken, whose answer carries its own challenge).
  const proto::SessionNonce challenge = challenge_for(rx, lj.epoch);
  if (rx.join.confirm) {
    if (incarnation == 0) {
      io.count_drop(lj, Drop::bad_request);  // a query confirms nothing
      return send_error(rx, proto::Status::bad_request, 0);
    }
    if (sodium_memcmp(rx.join.server_nonce.data(), challenge.data(), proto::kSessionNonceBytes) != 0) {
      // Answered below with the challenge of now. A challenge of the epoch just replaced is the race of every
      // run's start (a rank's handshake crossing its rank 0's epoch start), not a drop; any other is stale.
      const auto previous = static_cast<uint16_t>(lj.epoch - 1);
      if (sodium_memcmp(rx.join.server_nonce.data(), challenge_for(rx, previous).data(),
                        proto::kSessionNonceBytes) == 0) {
        bump(lj.counters.joins_rechallenged);
      } else {
        io.count_drop(lj, Drop::join_stale);
      }
    } else {
      if ((h.flags & proto::flag::epoch_start) != 0) {
        // Rank 0 of a new run restarts the job in the epoch after the current one. A confirm that names any
        // other epoch changes nothing; the answer tells the sender where the job stands.
        if (h.epoch == static_cast<uint16_t>(lj.epoch + 1) && p.incarnation != incarnation) {
          start_epoch(h.epoch, (h.flags & proto::flag::fresh_weights) != 0);
          p.incarnation = incarnation;
        }
      } else if (p.incarnation == 0) {
        // A rank joins the current epoch once: a second process claiming the rank (a worker of a new run,
        // before its rank 0 restarted the job) is told who holds it and waits for the restart.
        p.incarnation = incarnation;
        if (h.rank == 0 && hierarchical(plan.math)) hub().hub_state_changed();  // peers learn the holder
      }
      if (p.incarnation == incarnation) {
        if (!take_confirm(rx, p)) return;  // an earlier confirm of the holder, replayed: no answer
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
  a.chunk_id = plan.cfg.interface_map ? io.snap->ports[io.res.home_ports[io.res.index]].ipv4 : 0;
  // The address cookie of the join's source: the worker carries it back in every push, init, rerequest
  // and pull. Only the address's owner receives it.
  a.crc32c = proto::address_cookie(io.snap->cookie_key, plan.cfg.id, h.rank, rx.ip.src, rx.udp.src_port);
  send_joined(rx, a, jp);
}

proto::SessionNonce JobHandler::challenge_for(const RxFrame& rx, uint16_t epoch) const noexcept {
  proto::ChallengeContext c;
  c.job_id = plan.cfg.id;
  c.lcore_index = io.res.index;
  c.rank = rx.hdr.rank;
  c.epoch = epoch;
  c.incarnation = rx.hdr.aux;
  c.source = proto::ReplyAddress{rx.ip.src, rx.udp.src_port};
  c.worker_nonce = rx.join.worker_nonce;
  return proto::join_challenge(io.snap->challenge_key, c);
}

bool JobHandler::take_confirm(const RxFrame& rx, Peer& p) noexcept {
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
      io.count_drop(lj, Drop::replayed);
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
  ctx.lcore_index = io.res.index;
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

bool JobHandler::open_session(RxFrame& rx) noexcept {
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
        io.count_drop(lj, Drop::epoch_mismatch);
        rx.session = &p.former;
        send_error(rx, proto::Status::epoch_mismatch, lj.epoch);
        rx.session = nullptr;
      } else {
        io.count_drop(lj, Drop::session_replaced);
      }
      return false;
    }
    if (!inconclusive(fv)) v = fv;
  }
  io.count_drop(lj, !p.current.valid && !p.former.valid ? Drop::no_session : drop_for(v));
  return false;
}

void JobHandler::prove_or_credit(Peer& peer, RxFrame& rx) noexcept {
  if (proto::opcode_carries_cookie(rx.hdr.opcode) && rx.hdr.aux != 0 &&
      rx.hdr.aux == proto::address_cookie(io.snap->cookie_key, plan.cfg.id, rx.hdr.rank, rx.ip.src, rx.udp.src_port)) {
    peer.proven = true;
    peer.unproven_credit_bytes = 0;
    bump(lj.counters.addresses_proven);
    return;
  }
  peer.unproven_credit_bytes += rx.m->pkt_len;
  rx.credited = &peer;
}

void JobHandler::start_epoch(uint16_t epoch, bool fresh_weights) noexcept {
  for (uint32_t i = 0; i < lj.chunk_count(); ++i) {
    Chunk& c = lj.chunk(i);
    if (c.first_tsc != 0) close_round();
    // restart_chunk may rewrite out[cur ^ 1] (a ps job's weights). If a transmit still points at it and no
    // spare is free, that copy goes out with the new data under the old epoch's header, which every
    // worker of the new epoch drops (the epoch is in every header): harmless, unlike within an epoch.
    (void)release_previous(c);
    restart_chunk(plan.math, c, fresh_weights);
  }
  if (lj.capture != nullptr) {
    lj.capture->failed.store(true, std::memory_order_relaxed);  // its round is of the epoch that ends
    detach_capture();
  }
  __atomic_store_n(&lj.rounds_in_epoch, false, __ATOMIC_RELAXED);
  lj.epoch_first_round = 0;
  lj.fresh_weights_epoch = fresh_weights;
  if (fresh_weights) __atomic_store_n(&lj.fresh_weights_starts, lj.fresh_weights_starts + 1, __ATOMIC_RELEASE);
  lj.forget_peers();
  if (hierarchical(plan.math)) hub().hub_state_changed();  // the other hubs take the epoch from here
  __atomic_store_n(&lj.epoch, epoch, __ATOMIC_RELAXED);
  bump(lj.counters.epochs_started);
}

}  // namespace phub::engine

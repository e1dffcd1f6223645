// The client's loss recovery. A lane (server lcore) answers in transmission order, so a segment is lost
// when something sent a few packets after it was answered; it is then pushed again at once. A lane's
// timer expires only when no result at all came back on it for a retransmit timeout: its first expiry
// asks for the missing results (header-only rerequests: nothing is resent when the chunk is merely
// waiting for a slow worker), later ones, with exponential backoff, push the missing segments again.
#include <algorithm>

#include "phub/client/client.hpp"

namespace phub::client {
namespace {

// A packet is lost when one sent at least this many packets after it was answered, and it is overdue by
// more than the reordering window. As in TCP's RACK, the window starts at a quarter of the smoothed
// completion time and doubles whenever a resend proves needless (its round is answered twice), up to
// kMaxReorderScale times; it halves again after kQuietResends early resends without such proof. A
// loaded host reorders a lot: a packet left in one CPU's backlog can be overtaken for 100 ms and more.
constexpr uint64_t kReorderPackets = 2;
constexpr uint64_t kMinReorderNs = 1'000'000;
constexpr uint32_t kMaxReorderScale = 32;
constexpr uint32_t kQuietResends = 16;
constexpr uint64_t kGsoProbeTimeouts = 3;
// Timeouts in a row without any answer from a server lcore after which this client joins it again.
constexpr uint32_t kRejoinExpiries = 2;

}  // namespace

void Client::detect_losses(uint32_t l, uint64_t now) {
  Lanes::Lane& lane = lanes_.lane(l);
  const uint64_t delivered = lane.delivered_mark;
  const uint64_t overdue_ns = lane.delivered_rtt_ns + reorder_window_ns();
  lane.reorder_wake_ns = 0;
  uint32_t c = lane.head;
  for (uint32_t budget = lane.count; c != kNone && budget > 0; --budget) {
    const uint32_t next = lanes_.next(c);
    const ChunkState& cs = chunks_[c];
    if (!advances_round(ops_[cs.op].kind)) {  // ps init and pull answers come at once, in no order
      c = next;
      continue;
    }
    if (cs.xmit_mark + kReorderPackets >= delivered) return;  // this and every later chunk are recent
    if (cs.xmit_ns + overdue_ns > now) {  // may still be on its way: look again then
      lane.reorder_wake_ns = cs.xmit_ns + overdue_ns;
      return;
    }
    // Segment s went out at mark xmit_mark + s at the latest.
    const uint32_t segs = plan_->segments(c);
    const auto below = static_cast<uint32_t>(std::min<uint64_t>(segs, delivered - kReorderPackets - cs.xmit_mark));
    const uint64_t first = plan_->first_segment(c);
    uint32_t lost = 0;
    for (uint32_t s = 0; s < below; ++s) lost += tracker_.has(first + s) ? 0 : 1;
    if (lost != 0) {
      if (!make_room(lost)) return;
      ++st_.fast_retransmits;
      if (reorder_scale_ > 1 && ++reorder_quiet_ >= kQuietResends) {
        reorder_scale_ /= 2;
        reorder_quiet_ = 0;
      }
      resend_missing(c, proto::Opcode::push, true, below, now);
      chunks_[c].early_resent = true;
      chunks_[c].early_round = chunks_[c].round;
      chunks_[c].early_age = 0;
    }
    if (below < segs) return;  // its later segments are recent, and so is everything behind it
    c = next;
  }
}

uint64_t Client::reorder_window_ns() const noexcept {
  return std::max(kMinReorderNs, rto_.srtt_ns() / 4) * reorder_scale_;
}

void Client::needless_resend(uint32_t c) {
  chunks_[c].early_resent = false;  // one proof per resend
  ++st_.needless_resends;
  window_.undo();
  reorder_scale_ = std::min(kMaxReorderScale, reorder_scale_ * 2);
  reorder_quiet_ = 0;
}

void Client::service_timers(uint64_t now) {
  for (uint32_t l = 0; l < lanes_.size(); ++l) {
    const Lanes::Lane& lane = lanes_.lane(l);
    if (lane.count != 0 && lane.timer_ns <= now) expire_lane(l, now);
  }
}

void Client::expire_lane(uint32_t l, uint64_t now) {
  Lanes::Lane& lane = lanes_.lane(l);
  ++lane.expiries;
  ++st_.timeouts;
  if (transport_->gso() && st_.payload_bytes_received == 0 && st_.timeouts >= kGsoProbeTimeouts) {
    // Not one result yet: the path may not take GSO batches (an af_packet server behind a veth sees them
    // unsegmented and drops them as malformed). Fall back to one datagram per packet.
    transport_->disable_gso();
  }
  if (lane.expiries % kRejoinExpiries == 0) rejoin(l);
  // Chunks (re)sent less than a timeout ago are not overdue; the lane is in transmission order.
  const uint64_t rto = rto_.rto_ns();
  uint32_t c = lane.head;
  for (uint32_t budget = lane.count; c != kNone && budget > 0 && chunks_[c].xmit_ns + rto <= now; --budget) {
    const uint32_t next = lanes_.next(c);
    if (!expire_chunk(c, lane.expiries, now)) break;  // the send queue is full: the rest waits
    c = next;
  }
  lane.timer_ns = now + rto_.backoff_ns(lane.expiries);
}

void Client::rejoin(uint32_t owner) {
  // Nothing at all came back from this lcore for two timeouts: the way back may have moved. A NAT that
  // rebound this client's address sends its packets from a new port, and the server (which moves a rank's
  // proven address only through a join of the holder later than the one that set it) still answers the
  // old one. A join of this process, with its incarnation, moves the answers here and brings the address
  // cookie of the new address; where nothing moved, it costs one join and its answer.
  if (owner >= members_.size() || members_[owner].state != Membership::State::joined || !queue_room(1)) return;
  // A new attempt, with a nonce of its own: its answer brings the challenge (and the cookie) for the address
  // the server sees now, and the confirm of that challenge moves the rank's address (and, in a sessions job,
  // makes a new session there); until that answer comes this client goes on as before.
  new_join_nonce(owner);
  enqueue_control(proto::Opcode::join, owner, 0, members_[owner].epoch, incarnation_);
  ++members_[owner].unanswered_joins;
  ++rejoins_;
}

bool Client::expire_chunk(uint32_t c, uint32_t expiries, uint64_t now) {
  ChunkState& cs = chunks_[c];
  const Op& op = ops_[cs.op];
  const uint32_t segs = plan_->segments(c);
  if (op.step.hparams != 0) ensure_hparams(lane_of(c), op.step.hparams, now);  // unless acknowledged
  if (!make_room(cs.missing)) return false;
  switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::step: {
      // When the server reports another rank missing, only every fourth expiry pushes again.
      const bool other_missing = op.stall_rank >= 0 && op.stall_rank != opt_.rank;
      const bool push = other_missing ? expiries % 4 == 0 : expiries >= 2;
      if (push) {
        resend_missing(c, proto::Opcode::push, true, segs, now);
      } else {
        rerequest_missing(c);
      }
      break;
    }
    case OpKind::init_send:
      resend_missing(c, proto::Opcode::init, true, segs, now);
      break;
    case OpKind::pull:
      if (cs.missing == segs) {
        enqueue(proto::Opcode::pull, c, cs.round, kWholeChunk, false, true, nullptr);
        ++st_.retransmits;
        cs.resent = true;
      } else {
        resend_missing(c, proto::Opcode::pull, false, segs, now);
      }
      break;
  }
  return true;
}

bool Client::resend_chunk(uint32_t c, uint64_t now) {
  ChunkState& cs = chunks_[c];
  if (!make_room(cs.missing)) return false;
  switch (ops_[cs.op].kind) {
    case OpKind::allreduce:
    case OpKind::step:
      resend_missing(c, proto::Opcode::push, true, plan_->segments(c), now);
      break;
    case OpKind::init_send:
      resend_missing(c, proto::Opcode::init, true, plan_->segments(c), now);
      break;
    case OpKind::pull:
      resend_missing(c, proto::Opcode::pull, false, plan_->segments(c), now);
      break;
  }
  return true;
}

void Client::resend_missing(uint32_t c, proto::Opcode opc, bool payload, uint32_t below, uint64_t now) {
  ChunkState& cs = chunks_[c];
  window_.on_loss(cs.window_mark);  // a loss is likely: slow down
  const uint64_t mark = marks_;
  const uint64_t first = plan_->first_segment(c);
  for (uint32_t s = 0; s < below; ++s) {
    if (tracker_.has(first + s)) continue;
    enqueue(opc, c, cs.round, s, payload, true, ops_[cs.op].src);
    ++st_.retransmits;
  }
  cs.resent = true;
  lanes_.move_to_back(c);
  transmitted(c, now, mark);
}

void Client::retry_pulls(uint64_t now) {
  size_t kept = 0;
  for (const auto& [when, c] : pull_retries_) {
    const ChunkState& cs = chunks_[c];
    if (cs.op == kNone || ops_[cs.op].kind != OpKind::pull || cs.missing != plan_->segments(c)) continue;  // answered
    if (when > now || !make_room(1)) {
      pull_retries_[kept++] = {when, c};
      continue;
    }
    enqueue(proto::Opcode::pull, c, cs.round, kWholeChunk, false, true, nullptr);
  }
  pull_retries_.resize(kept);
}

void Client::rerequest_missing(uint32_t c) {
  // Header-only: the server answers for the segments it completed and ignores the others.
  ChunkState& cs = chunks_[c];
  const uint32_t segs = plan_->segments(c);
  cs.resent = true;  // answers may come from either request: no RTT sample, no delivery order
  if (cs.missing == segs) {
    enqueue(proto::Opcode::rerequest, c, cs.round, kWholeChunk, false, true, nullptr);
    ++st_.rerequests;
    return;
  }
  const uint64_t first = plan_->first_segment(c);
  for (uint32_t s = 0; s < segs; ++s) {
    if (tracker_.has(first + s)) continue;
    enqueue(proto::Opcode::rerequest, c, cs.round, s, false, true, nullptr);
    ++st_.rerequests;
  }
}

}  // namespace phub::client

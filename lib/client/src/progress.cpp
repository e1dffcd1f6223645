// The client's progress engine: starting chunks within the window, building and sending packets,
// retransmit timers with backoff, deadlines, and the bookkeeping of finished or failed requests.
#include <algorithm>

#include "phub/client/client.hpp"
#include "phub/client/clock.hpp"
#include "phub/proto/auth.hpp"

namespace phub::client {
namespace {

constexpr uint32_t kWholeChunk = UINT32_MAX;  // a request (rerequest, pull) for every segment of a chunk
constexpr int kReceiveBatchesPerPump = 16;
constexpr uint64_t kGsoProbeTimeouts = 3;
constexpr uint32_t kGapSegments = 3;  // results past a missing segment that trigger an early retransmit

uint32_t next_round(uint32_t r, uint32_t modulus) noexcept { return modulus == 0 ? r + 1 : (r + 1) % modulus; }

}  // namespace

void Client::pump(uint64_t now) {
  receive_all(now);
  service_timers(now);
  start_chunks(now);
  flush();
  check_deadlines(now);
}

void Client::receive_all(uint64_t now) {
  for (int i = 0; i < kReceiveBatchesPerPump; ++i) {
    auto got = transport_->receive([&](std::span<const std::byte> bytes, const Endpoint& from) {
      on_datagram(bytes, from, now);
    });
    if (!got) {
      for (uint32_t slot : std::vector<uint32_t>(live_)) fail_op(slot, got.error());
      return;
    }
    if (*got == 0) return;
  }
}

void Client::enqueue(proto::Opcode opc, uint32_t chunk, uint32_t round, uint32_t seg, bool with_payload,
                     bool retransmit, const std::byte* payload_base) {
  proto::Header h;
  h.opcode = opc;
  h.flags = retransmit ? proto::flag::retransmit : 0;
  h.dtype = opt_.dtype;
  h.job_id = opt_.job_id;
  h.rank = opt_.rank;
  h.round = round;
  h.chunk_id = chunk;
  const std::byte* payload = nullptr;
  uint32_t bytes = 0;
  if (seg != kWholeChunk) {
    const uint32_t n = plan_->segment_len(chunk, seg);
    h.elem_offset = seg * plan_->segment_elems();
    h.elem_count = static_cast<uint16_t>(n);
    if (with_payload) {
      payload = payload_base + plan_->key_byte_offset(chunk, seg);
      bytes = static_cast<uint32_t>(n * plan_->elem_bytes());
      h.payload_bytes = static_cast<uint16_t>(bytes);
      if (opt_.crc) {
        h.flags |= proto::flag::crc;
        h.crc32c = proto::crc32c(std::span(payload, bytes));
      }
      st_.payload_bytes_sent += bytes;
    }
  }
  h.seq = seq_++;
  const size_t i = queue_.size();
  auto wire = std::span<std::byte, proto::kHeaderBytes>(headers_[i]);
  proto::write_header(h, wire);
  if (authenticated_) proto::sign_header(auth_, wire);
  queue_.push_back(OutPacket{plan_->endpoint(chunk), headers_[i].data(), payload, bytes});
}

void Client::send_control(proto::Opcode opc) {
  for (uint32_t server : opt_.servers) {
    for (uint16_t lcore = 0; lcore < opt_.server_lcores; ++lcore) {
      if (!queue_room(1)) flush();
      if (!queue_room(1)) return;
      proto::Header h;
      h.opcode = opc;
      h.dtype = opt_.dtype;
      h.job_id = opt_.job_id;
      h.rank = opt_.rank;
      h.seq = seq_++;
      const size_t i = queue_.size();
      auto wire = std::span<std::byte, proto::kHeaderBytes>(headers_[i]);
      proto::write_header(h, wire);
      if (authenticated_) proto::sign_header(auth_, wire);
      queue_.push_back(OutPacket{Endpoint{server, static_cast<uint16_t>(opt_.port_base + lcore)}, headers_[i].data(),
                                 nullptr, 0});
    }
  }
  flush();
}

void Client::flush() {
  if (queue_.empty()) return;
  auto sent = transport_->send(queue_);
  if (!sent) {
    queue_.clear();
    for (uint32_t slot : std::vector<uint32_t>(live_)) fail_op(slot, sent.error());
    return;
  }
  const size_t n = *sent;
  send_blocked_ = n < queue_.size();
  if (!send_blocked_) {
    queue_.clear();
    return;
  }
  // The socket buffer is full: keep the rest, in order, for the next flush.
  for (size_t i = n; i < queue_.size(); ++i) {
    headers_[i - n] = headers_[i];
    queue_[i - n] = queue_[i];
    queue_[i - n].header = headers_[i - n].data();
  }
  queue_.resize(queue_.size() - n);
}

void Client::start_chunks(uint64_t now) {
  while (!waiting_.empty()) {
    const uint32_t slot = waiting_.front();
    Op& op = ops_[slot];
    while (!op.done && op.next_chunk < op.end_chunk) {
      const uint32_t c = op.next_chunk;
      if (chunks_[c].op != kNone) return;  // an earlier request still uses this chunk: keep the order
      const uint32_t segs = plan_->segments(c);
      if (!window_.may_send(segs)) return;
      const size_t packets = op.kind == OpKind::pull ? 1 : segs;
      if (!queue_room(packets)) {
        flush();
        if (!queue_room(packets)) return;
      }
      start_chunk(slot, c, now);
      ++op.next_chunk;
    }
    waiting_.pop_front();
  }
}

void Client::start_chunk(uint32_t slot, uint32_t c, uint64_t now) {
  const Op& op = ops_[slot];
  ChunkState& cs = chunks_[c];
  const uint32_t segs = plan_->segments(c);
  const uint64_t first = plan_->first_segment(c);
  cs.op = slot;
  cs.missing = segs;
  cs.attempts = 0;
  cs.highest = 0;
  cs.fast_done = false;
  cs.sent_ns = now;
  cs.timer_ns = now + rto_.rto_ns();
  cs.send_mark = window_.send_mark();
  cs.inflight_at = static_cast<uint32_t>(inflight_.size());
  inflight_.push_back(c);
  tracker_.clear(first, segs);
  window_.on_send(segs);
  switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::step:
      for (uint32_t s = 0; s < segs; ++s) enqueue(proto::Opcode::push, c, cs.round, s, true, false, op.src);
      break;
    case OpKind::init_send:
      for (uint32_t s = 0; s < segs; ++s) {
        enqueue(proto::Opcode::init, c, cs.round, s, true, false, op.src);
        tracker_.add_stale(first + s);
      }
      break;
    case OpKind::pull:
      enqueue(proto::Opcode::pull, c, cs.round, kWholeChunk, false, false, nullptr);
      for (uint32_t s = 0; s < segs; ++s) tracker_.add_stale(first + s);
      break;
  }
}

void Client::service_timers(uint64_t now) {
  for (size_t i = 0; i < inflight_.size(); ++i) {
    const uint32_t c = inflight_[i];
    if (chunks_[c].timer_ns > now) continue;
    if (!queue_room(plan_->segments(c))) {
      flush();
      if (!queue_room(plan_->segments(c))) return;
    }
    resend(c, now);
  }
}

void Client::resend_missing(uint32_t c, proto::Opcode opc, bool payload, bool stale, uint32_t below) {
  ChunkState& cs = chunks_[c];
  window_.on_timeout(cs.send_mark);  // a loss is likely: slow down
  cs.send_mark = window_.send_mark();
  const uint64_t first = plan_->first_segment(c);
  for (uint32_t s = 0; s < below; ++s) {
    if (tracker_.has(first + s)) continue;
    enqueue(opc, c, cs.round, s, payload, true, ops_[cs.op].src);
    if (stale) tracker_.add_stale(first + s);
    ++st_.retransmits;
  }
}

void Client::resend(uint32_t c, uint64_t now) {
  ChunkState& cs = chunks_[c];
  const Op& op = ops_[cs.op];
  ++cs.attempts;
  ++st_.timeouts;
  cs.fast_done = false;
  if (transport_->gso() && st_.payload_bytes_received == 0 && st_.timeouts >= kGsoProbeTimeouts) {
    // Not one result yet: the path may not take GSO batches (an af_packet server behind a veth sees them
    // unsegmented and drops them as malformed). Fall back to one datagram per packet.
    transport_->disable_gso();
  }
  cs.timer_ns = now + rto_.backoff_ns(cs.attempts);
  const uint32_t segs = plan_->segments(c);
  switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::step: {
      // The first expiry sends a header-only rerequest: it fetches results that were lost, and costs
      // nothing when the chunk is merely late (another rank is slow, or this host is busy; losses inside
      // a chunk are repaired earlier by fast_resend). Later expiries send the missing pushes again (the
      // server answers a duplicate of a complete segment with its result); when the server reports
      // another rank missing, only every fourth expiry does.
      const bool other_missing = op.stall_rank >= 0 && op.stall_rank != opt_.rank;
      const bool push = other_missing ? cs.attempts % 4 == 0 : cs.attempts >= 2;
      if (push) {
        resend_missing(c, proto::Opcode::push, true, false, segs);
      } else {
        enqueue(proto::Opcode::rerequest, c, cs.round, kWholeChunk, false, true, nullptr);
        ++st_.rerequests;
      }
      break;
    }
    case OpKind::init_send:
      resend_missing(c, proto::Opcode::init, true, true, segs);
      break;
    case OpKind::pull:
      if (cs.missing == segs) {
        enqueue(proto::Opcode::pull, c, cs.round, kWholeChunk, false, true, nullptr);
        const uint64_t first = plan_->first_segment(c);
        for (uint32_t s = 0; s < segs; ++s) tracker_.add_stale(first + s);
        ++st_.retransmits;
      } else {
        resend_missing(c, proto::Opcode::pull, false, true, segs);
      }
      break;
  }
}

void Client::fast_resend(uint32_t c) {
  // Results arrive in segment order unless something was lost: three results past a missing segment mean
  // a lost push or result. Resend the pushes below the highest result now instead of at the timer.
  ChunkState& cs = chunks_[c];
  if (cs.fast_done || cs.op == kNone || !advances_round(ops_[cs.op].kind)) return;
  const uint32_t received = plan_->segments(c) - cs.missing;
  if (received >= cs.highest + 1) return;  // no gap below the highest result
  const uint64_t first = plan_->first_segment(c);
  uint32_t lowest_missing = 0;
  while (tracker_.has(first + lowest_missing)) ++lowest_missing;
  if (cs.highest < lowest_missing + kGapSegments || !queue_room(cs.highest)) return;
  cs.fast_done = true;
  ++st_.fast_retransmits;
  resend_missing(c, proto::Opcode::push, true, false, cs.highest);
}

void Client::detach_chunk(uint32_t c) {
  ChunkState& cs = chunks_[c];
  const uint32_t at = cs.inflight_at;
  const uint32_t last = inflight_.back();
  inflight_[at] = last;
  chunks_[last].inflight_at = at;
  inflight_.pop_back();
  cs.op = kNone;
}

void Client::chunk_done(uint32_t c, uint64_t now) {
  ChunkState& cs = chunks_[c];
  const uint32_t slot = cs.op;
  if (cs.attempts == 0) rto_.sample(now - cs.sent_ns);  // Karn: never from a chunk whose timer expired
  detach_chunk(c);
  if (advances_round(ops_[slot].kind)) {
    cs.round = next_round(cs.round, opt_.round_modulus);
    tracker_.clear_stale(plan_->first_segment(c), plan_->segments(c));  // older answers carry older rounds
  }
  if (--ops_[slot].chunks_left == 0) finish_op(slot);
}

void Client::finish_op(uint32_t slot) {
  ops_[slot].done = true;
  live_.erase(std::find(live_.begin(), live_.end(), slot));
  ++st_.ops_completed;
}

void Client::fail_op(uint32_t slot, Error e) {
  Op& op = ops_[slot];
  if (op.done) return;
  for (uint32_t c = op.first_chunk; c < op.next_chunk; ++c) {
    if (chunks_[c].op != slot) continue;
    window_.on_abandon(chunks_[c].missing);
    detach_chunk(c);
  }
  if (!broken_) {
    broken_ = Error{PHUB_ERR_BROKEN, "an earlier operation failed, so rounds may be out of step with the server "
                                     "(reconnect and restart the job): " + e.message};
  }
  op.err = std::move(e);
  op.done = true;
  live_.erase(std::find(live_.begin(), live_.end(), slot));
}

void Client::check_deadlines(uint64_t now) {
  for (size_t i = 0; i < live_.size();) {
    const uint32_t slot = live_[i];
    if (ops_[slot].deadline_ns > now) {
      ++i;
      continue;
    }
    fail_op(slot, timeout_error(ops_[slot]));  // removes live_[i]
  }
}

uint64_t Client::next_wake(uint64_t now) const noexcept {
  uint64_t wake = UINT64_MAX;
  for (uint32_t slot : live_) wake = std::min(wake, ops_[slot].deadline_ns);
  for (uint32_t c : inflight_) wake = std::min(wake, chunks_[c].timer_ns);
  return std::max(wake, now);
}

}  // namespace phub::client

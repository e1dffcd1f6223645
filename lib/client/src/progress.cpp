// The client's progress engine: starting chunks within the window, building and sending packets,
// deadlines, and the bookkeeping of finished or failed requests (loss recovery: recovery.cpp).
#include <algorithm>

#include "phub/base/bytes.hpp"
#include "phub/client/client.hpp"
#include "phub/client/clock.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::client {
namespace {

constexpr int kReceiveBatchesPerPump = 16;

}  // namespace

void Client::pump(uint64_t now) {
  receive_all(now);
  if (!all_joined()) service_joins(now);
  if (plan_) {
    for (uint32_t l = 0; l < lanes_.size(); ++l) detect_losses(l, now);
    if (!pull_retries_.empty()) retry_pulls(now);
  }
  service_timers(now);
  if (all_joined()) start_chunks(now);
  if (transfer_.active) service_transfer(now);
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
  // A ps step's pushes name their round's hyperparameter set in the tail and may declare it non-finite.
  const StepSettings none;
  const StepSettings& step = opc == proto::Opcode::push && chunks_[chunk].op != kNone ? ops_[chunks_[chunk].op].step : none;
  if (step.nonfinite) h.flags |= proto::flag::nonfinite;
  const uint32_t tail_bytes = step.hparams != 0 && with_payload ? static_cast<uint32_t>(proto::kTailBytes) : 0u;
  if (tail_bytes != 0) h.flags |= proto::flag::tail;
  h.dtype = opt_.dtype;
  h.job_id = opt_.job_id;
  h.rank = opt_.rank;
  h.round = round;
  h.chunk_id = chunk;
  const uint32_t owner = lane_of(chunk);
  const Session& session = members_[owner].session;
  h.epoch = members_[owner].epoch;
  h.aux = session.active ? 0 : members_[owner].cookie;  // a session proves the address: no cookie
  const std::byte* payload = nullptr;
  uint32_t bytes = 0;
  if (seg != kWholeChunk) {
    const uint32_t n = plan_->segment_len(chunk, seg);
    h.elem_offset = seg * plan_->segment_elems();
    h.elem_count = static_cast<uint16_t>(n);
    if (with_payload) {
      payload = payload_base + plan_->key_byte_offset(chunk, seg);
      bytes = static_cast<uint32_t>(n * plan_->elem_bytes());
      h.payload_bytes = static_cast<uint16_t>(bytes + tail_bytes);
      if (tail_bytes != 0) store_be<uint64_t>(headers_[queue_.size()].data() + proto::kHeaderBytes, step.hparams);
      if (opt_.crc && !(session.active && session.payload_mac)) {  // the MAC takes the crc32c field
        h.flags |= proto::flag::crc;
        h.crc32c = proto::crc32c(std::span(payload, bytes),
                                 std::span(headers_[queue_.size()].data() + proto::kHeaderBytes, tail_bytes));
      }
      st_.payload_bytes_sent += bytes;
    }
  }
  h.seq = seq_++;
  ++marks_;
  const size_t i = queue_.size();
  auto wire = std::span<std::byte, proto::kHeaderBytes>(headers_[i].data(), proto::kHeaderBytes);
  proto::write_header(h, wire);
  if (session.active) {
    seal_for_session(owner, h, wire, std::span(payload, bytes), std::span(headers_[i].data() + proto::kHeaderBytes, tail_bytes));
  } else if (authenticated_) {
    proto::sign_header(auth_, wire);
  }
  queue_packet(endpoint_of_owner(owner), payload, bytes, payload != nullptr ? chunks_[chunk].op : kNone, tail_bytes);
}

bool Client::make_room(size_t packets) {
  if (queue_room(packets)) return true;
  flush();
  return queue_room(packets);
}

void Client::enqueue_control(proto::Opcode opc, uint32_t owner, uint16_t flags, uint16_t epoch, uint32_t incarnation) {
  proto::Header h;
  h.opcode = opc;
  h.flags = flags;
  h.dtype = opt_.dtype;
  h.job_id = opt_.job_id;
  h.rank = opt_.rank;
  h.epoch = epoch;
  h.aux = incarnation;  // join: who claims the rank (0: nobody, a question); leave: who gives it up
  h.seq = seq_++;
  // Every join carries the 44-byte payload of its attempt (the nonce its answer must echo); a leave goes
  // under the session when there is one.
  const bool join = opc == proto::Opcode::join;
  const Membership& m = members_[owner];
  if (join) h.payload_bytes = proto::kJoinPayloadBytes;
  // A client that follows the chunk-to-interface map may be redirected by the lcore its join reaches.
  if (join && opt_.interface_map) h.flags = static_cast<uint16_t>(h.flags | proto::flag::follows_map);
  const size_t i = queue_.size();
  auto wire = std::span<std::byte, proto::kHeaderBytes>(headers_[i].data(), proto::kHeaderBytes);
  proto::write_header(h, wire);
  if (join) {
    if (authenticated_) proto::seal_handshake(handshake_auth_, wire, m.join_payload);
  } else if (m.session.active) {
    seal_for_session(owner, h, wire, {});
  } else if (authenticated_) {
    proto::sign_header(auth_, wire);
  }
  queue_packet(endpoint_of_owner(owner), join ? m.join_payload.data() : nullptr,
               join ? static_cast<uint32_t>(proto::kJoinPayloadBytes) : 0u, kNone);
}

void Client::seal_for_session(uint32_t owner, const proto::Header& h, std::span<std::byte, proto::kHeaderBytes> wire,
                              std::span<const std::byte> payload, std::span<const std::byte> tail) {
  // The payload goes out from the caller's tensor, apart from the header (and the tail, after it).
  Session& s = members_[owner].session;
  const bool elements = h.opcode == proto::Opcode::push || h.opcode == proto::Opcode::init;
  proto::seal_session_header(proto::worker_to_server(s.keys), wire, payload, tail, s.reply, s.next_tx_seq++,
                             s.payload_mac && elements);
}

void Client::unqueue(uint32_t slot) {
  unqueue_if([slot](const OutPacket& p) { return p.op == slot; });
}

void Client::unqueue_if(const std::function<bool(const OutPacket&)>& drop) {
  size_t kept = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (drop(queue_[i])) continue;
    if (kept != i) {
      headers_[kept] = headers_[i];
      queue_[kept] = queue_[i];
    }
    repoint(kept);
    ++kept;
  }
  queue_.resize(kept);
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
    repoint(i - n);
  }
  queue_.resize(queue_.size() - n);
}

void Client::start_chunks(uint64_t now) {
  while (!waiting_.empty() && all_joined()) {
    const uint32_t slot = waiting_.front();
    Op& op = ops_[slot];
    while (!op.done && op.next_chunk < op.end_chunk) {
      const uint32_t c = op.next_chunk;
      if (chunks_[c].op != kNone) return;  // an earlier request still uses this chunk: keep the order
      if (!window_.may_send(uint64_t{plan_->layout().chunk(c).elems} * plan_->elem_bytes())) return;
      if (op.step.hparams != 0) ensure_hparams(lane_of(c), op.step.hparams, now);
      if (!make_room(op.kind == OpKind::pull ? 1 : plan_->segments(c))) return;
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
  cs.missing_bytes = uint64_t{plan_->layout().chunk(c).elems} * plan_->elem_bytes();
  cs.resent = false;
  if (cs.early_resent && ++cs.early_age > kEarlyProofOps) cs.early_resent = false;
  cs.first_ns = now;
  tracker_.clear(first, segs);
  window_.on_send(cs.missing_bytes);
  Lanes::Lane& lane = lanes_.lane(lane_of(c));
  if (lane.count == 0) lane.timer_ns = now + rto_.rto_ns();  // the lane's timer runs while it has chunks
  const uint64_t mark = marks_;
  switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::step:
      for (uint32_t s = 0; s < segs; ++s) enqueue(proto::Opcode::push, c, cs.round, s, true, false, op.src);
      break;
    case OpKind::init_send:
      for (uint32_t s = 0; s < segs; ++s) enqueue(proto::Opcode::init, c, cs.round, s, true, false, op.src);
      break;
    case OpKind::pull:
      enqueue(proto::Opcode::pull, c, cs.round, kWholeChunk, false, false, nullptr);
      break;
  }
  lanes_.push_back(lane_of(c), c);
  transmitted(c, now, mark);
}

void Client::transmitted(uint32_t c, uint64_t now, uint64_t first_mark) {
  ChunkState& cs = chunks_[c];
  cs.xmit_ns = now;
  cs.xmit_mark = first_mark;
  cs.window_mark = window_.send_mark();
}

void Client::detach_chunk(uint32_t c) {
  if (lanes_.linked(c)) lanes_.remove(c);
  chunks_[c].op = kNone;
}

void Client::chunk_done(uint32_t c, uint64_t now) {
  ChunkState& cs = chunks_[c];
  const uint32_t slot = cs.op;
  if (!cs.resent) rto_.sample(now - cs.first_ns);  // Karn: never from a chunk sent (or asked for) again
  detach_chunk(c);
  if (advances_round(ops_[slot].kind)) cs.round = next_round(cs.round, opt_.round_modulus);
  if (--ops_[slot].chunks_left == 0) finish_op(slot);
}

void Client::finish_op(uint32_t slot) {
  unqueue(slot);
  ops_[slot].done = true;
  live_.erase(std::find(live_.begin(), live_.end(), slot));
  ++st_.ops_completed;
}

void Client::fail_op(uint32_t slot, Error e, bool breaks) {
  Op& op = ops_[slot];
  if (op.done) return;
  for (uint32_t c = op.first_chunk; c < op.next_chunk; ++c) {
    if (chunks_[c].op != slot) continue;
    window_.on_abandon(chunks_[c].missing_bytes);
    detach_chunk(c);
  }
  if (!broken_ && breaks) {
    broken_ = Error{PHUB_ERR_BROKEN, "an earlier operation failed, so rounds may be out of step with the server "
                                     "(reconnect and restart the job): " + e.message};
  }
  unqueue(slot);
  op.err = std::move(e);
  op.done = true;
  live_.erase(std::find(live_.begin(), live_.end(), slot));
}

void Client::fail_all(const Error& e) {
  if (!broken_) broken_ = e;  // later calls fail with the same reason (e.g. the job's restart), not "broken"
  for (uint32_t slot : std::vector<uint32_t>(live_)) fail_op(slot, e);
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
  for (const auto& r : pull_retries_) wake = std::min(wake, r.first);
  if (transfer_.active) wake = std::min({wake, transfer_.resend_ns, transfer_.deadline_ns});
  for (uint32_t l = 0; l < lanes_.size(); ++l) {
    const Lanes::Lane& lane = lanes_.lane(l);
    if (lane.count != 0) wake = std::min(wake, lane.timer_ns);
    if (lane.reorder_wake_ns != 0) wake = std::min(wake, lane.reorder_wake_ns);
  }
  return std::max(wake, now);
}

}  // namespace phub::client

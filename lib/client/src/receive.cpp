// The client's receive side: validating what the servers send, deduplicating results, writing them
// into the caller's buffer, and turning server errors into request failures or retries.
#include <algorithm>
#include <cstring>

#include "phub/client/client.hpp"
#include "phub/client/clock.hpp"
#include "phub/proto/hparams.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::client {
namespace {

constexpr uint64_t kPullRetryNs = 5'000'000;  // a pull that found no weights yet asks again after 5 ms

}  // namespace

void Client::on_datagram(std::span<const std::byte> bytes, const Endpoint& from, uint64_t now) {
  const int64_t owner = owner_of(from);
  if (owner < 0) {
    ++st_.malformed;
    return;
  }
  auto h = proto::parse_header(bytes);
  if (!h && h.error() == proto::ParseError::bad_crc) {  // changed on the way: a fault, or an attacker
    ++st_.bad_checksum;
    return;
  }
  if (!h || h->job_id != opt_.job_id || h->rank != opt_.rank) {
    ++st_.malformed;
    return;
  }
  const auto o = static_cast<uint32_t>(owner);
  if (o >= members_.size()) {
    ++st_.malformed;
    return;
  }
  // A joined counts only as the answer to this client's pending join (its nonce echoed, under the handshake
  // key); every other packet of a session opens under it, the rest carries the job key's tag.
  std::optional<proto::JoinedPayload> joined;
  if (h->opcode == proto::Opcode::joined) {
    joined = take_joined(bytes.first(proto::kHeaderBytes + h->payload_bytes), o);
    if (!joined) {
      // From the address given after the lcore moved to its interface: a late answer to a join sent there before
      // the move (another nonce), which moves nothing any more.
      const bool left_behind = !(endpoint_of_owner(o) == given_endpoint(o)) && from == given_endpoint(o);
      ++(left_behind ? st_.stale : st_.bad_tag);
      return;
    }
  } else if (members_[o].session.active) {
    if (!open_session(bytes.first(proto::kHeaderBytes + h->payload_bytes), *h, o)) return;
  } else if (authenticated_ && !proto::verify_header(auth_, bytes.first<proto::kHeaderBytes>())) {
    ++st_.bad_tag;
    return;
  }
  answered_ = true;
  members_[o].heard_ns = now;
  members_[o].unanswered_joins = 0;
  if (joined) return on_joined(*h, *joined, o, now);
  if (h->opcode == proto::Opcode::error && h->status == proto::Status::epoch_mismatch) {
    return on_epoch_mismatch(*h, o, now);
  }
  // Only what belongs to the epoch this client joined on that lcore.
  if (!plan_ || members_[o].state != Membership::State::joined || h->epoch != members_[o].epoch) {
    ++st_.stale;
    return;
  }
  // Every result carries a checksum of its payload, or the session's payload MAC: one without either was
  // not sent so by a server (docs/protocol.md, "Results").
  if (h->opcode == proto::Opcode::result && (h->flags & (proto::flag::crc | proto::flag::mac)) == 0) {
    ++st_.bad_checksum;
    return;
  }
  if (h->opcode == proto::Opcode::result && h->status != proto::Status::ok) {
    on_state_result(*h, bytes.subspan(proto::kHeaderBytes, h->payload_bytes));
  } else if (h->opcode == proto::Opcode::result) {
    on_result(*h, bytes.subspan(proto::kHeaderBytes, h->payload_bytes), now);
  } else if (h->opcode == proto::Opcode::hparams) {
    on_hparams_answer(*h, o);
  } else if (h->opcode == proto::Opcode::error) {
    on_error(*h);
  } else {
    ++st_.malformed;
  }
}

bool Client::open_session(std::span<const std::byte> bytes, const proto::Header& h, uint32_t owner) {
  using V = proto::SessionVerdict;
  const auto open = [&](Session& s) {
    return proto::open_session_packet(proto::server_to_worker(s.keys), s.rx, bytes, s.reply,
                                      s.payload_mac && proto::session_opcode_has_mac(h.opcode));
  };
  Membership& m = members_[owner];
  V v = open(m.session);
  // A wrong tag or a number seen before under the current session says nothing of the ones it replaced
  // (each has its own numbers): the server may still be answering under one of them.
  Session* opened = v == V::ok ? &m.session : nullptr;
  for (Session* older : {&m.replaced, &m.last_heard}) {
    if ((v != V::bad_tag && v != V::replayed) || !older->active) continue;
    const V ov = open(*older);
    if (ov != V::bad_tag) v = ov;
    if (ov == V::ok) opened = older;
  }
  switch (v) {
    case proto::SessionVerdict::ok:
      opened->heard = true;
      if (opened == &m.replaced) {  // the server took it up: the newest heard from (moved, one window each)
        m.last_heard = m.replaced;
        m.replaced = Session{};
      }
      return true;
    case proto::SessionVerdict::replayed:
      ++st_.replayed;
      return false;
    case proto::SessionVerdict::bad_tag:
      ++st_.bad_tag;
      return false;
    case proto::SessionVerdict::bad_mac:
    case proto::SessionVerdict::mac_missing:
      ++st_.bad_mac;
      return false;
  }
  return false;
}

void Client::on_result(const proto::Header& h, std::span<const std::byte> payload, uint64_t now) {
  if (h.chunk_id >= plan_->chunk_count()) {
    ++st_.malformed;
    return;
  }
  const uint32_t c = h.chunk_id;
  ChunkState& cs = chunks_[c];
  const uint32_t se = plan_->segment_elems();
  const uint32_t seg = h.elem_offset / se;
  // A result labelled r is the state after round r: a round's own result, or (answering a ps init or
  // pull, which do not start a round) the weights after the round before the chunk's next one.
  const bool wanted = cs.op != kNone && h.round == (advances_round(ops_[cs.op].kind)
                                                        ? cs.round
                                                        : prev_round(cs.round, opt_.round_modulus));
  if (!wanted) {
    ++st_.stale;
    // A second answer of a round that was pushed again early: the first push was only late.
    if (cs.early_resent && cs.early_round == h.round) needless_resend(c);
    return;
  }
  const uint32_t slot = cs.op;
  const Op& op = ops_[slot];
  if (h.elem_offset % se != 0 || seg >= plan_->segments(c) || h.elem_count != plan_->segment_len(c, seg)) {
    return fail_op(slot, Error{PHUB_ERR_CHUNK_MAP,
                               "the server sent elements " + std::to_string(h.elem_offset) + "+" +
                                   std::to_string(h.elem_count) + " of chunk " + std::to_string(c) +
                                   ", which has " + std::to_string(plan_->layout().chunk(c).elems) +
                                   " elements in segments of " + std::to_string(se) + " here: " + where()});
  }
  if (h.dtype != opt_.dtype) {
    return fail_op(slot, Error{PHUB_ERR_CONFIG_MISMATCH, "the server's results are " + std::string(dtype_name(h.dtype)) +
                                                             ", the client expects " +
                                                             std::string(dtype_name(opt_.dtype)) + " (config.dtype)"});
  }
  const bool mean = (h.flags & proto::flag::mean) != 0;
  if (opt_.mode == Mode::allreduce && mean != opt_.mean) {
    return fail_op(slot, Error{PHUB_ERR_CONFIG_MISMATCH, std::string("the server's job reduces by ") +
                                                             (mean ? "mean" : "sum") + ", the client was told " +
                                                             (opt_.mean ? "mean" : "sum") + " (config.reduce)"});
  }
  if ((h.flags & proto::flag::tail) != 0) {
    ++st_.malformed;  // a round's result carries no tail
    return;
  }
  const uint64_t gs = plan_->first_segment(c) + seg;
  if (!tracker_.mark(gs)) {
    ++st_.duplicates;
    if (cs.early_resent && cs.early_age == 0 && cs.early_round == cs.round) needless_resend(c);
    return;
  }
  if (op.dst != nullptr) std::memcpy(op.dst + plan_->key_byte_offset(c, seg), payload.data(), payload.size());
  // A skipped round (a rank declared it non-finite) answers with the weights as they were.
  if (op.kind == OpKind::step && (h.flags & proto::flag::nonfinite) != 0) ops_[slot].skipped = true;
  members_[lane_of(c)].used = true;
  st_.payload_bytes_received += payload.size();
  const uint64_t bytes = segment_bytes(c, seg);
  // A round trip only from what was sent once, and only for rounds (ps init and pull answers wait for nobody).
  window_.on_result(bytes, !cs.resent && advances_round(op.kind) ? std::max<uint64_t>(now - cs.xmit_ns, 1) : 0, now);
  cs.missing_bytes -= std::min(cs.missing_bytes, bytes);
  // The lane made progress: its timer restarts, and what was sent before this packet should be answered.
  Lanes::Lane& lane = lanes_.lane(lane_of(c));
  lane.expiries = 0;
  lane.timer_ns = now + rto_.rto_ns();
  if (!cs.resent && advances_round(op.kind) && cs.xmit_mark + seg + 1 > lane.delivered_mark) {
    lane.delivered_mark = cs.xmit_mark + seg + 1;
    lane.delivered_rtt_ns = now - cs.xmit_ns;
  }
  if (--cs.missing == 0) chunk_done(c, now);
}

void Client::on_error(const proto::Header& h) {
  ++st_.errors_received;
  if (h.status == proto::Status::round_stalled) ++st_.stalls_reported;
  if (on_hparams_error(h) || on_transfer_error(h)) return;
  if (h.chunk_id >= plan_->chunk_count()) {
    if (h.status != proto::Status::unknown_chunk || live_.empty()) {
      ++st_.stale;
      return;
    }
  }
  const uint32_t c = h.chunk_id < plan_->chunk_count() ? h.chunk_id : 0;
  ChunkState& cs = chunks_[c];
  const uint32_t slot = h.status == proto::Status::unknown_chunk && cs.op == kNone ? live_.front() : cs.op;
  if (slot == kNone || (h.status != proto::Status::unknown_chunk && h.round != cs.round)) {
    ++st_.stale;  // an answer to an older request
    return;
  }
  Op& op = ops_[slot];
  const std::string chunk = "chunk " + std::to_string(h.chunk_id) + " (key " + std::to_string(op.key) + ")";
  switch (h.status) {
    case proto::Status::round_stalled:
      op.stall_rank = static_cast<int32_t>(h.aux);
      break;
    case proto::Status::not_initialized:
      op.not_initialized_seen = true;
      if (op.kind == OpKind::pull) pull_retries_.emplace_back(now_ns() + kPullRetryNs, c);
      break;
    case proto::Status::ok:
    case proto::Status::epoch_mismatch:  // handled before (on_epoch_mismatch)
      break;
    case proto::Status::draining:
      fail_op(slot, Error{PHUB_ERR_DRAINED, chunk + ": the server starts no new round of job " +
                                                std::to_string(opt_.job_id) +
                                                ": the operator drained it (phub-ctl drain) or a reload removes it"});
      break;
    case proto::Status::round_ahead:
    case proto::Status::round_behind:
      fail_op(slot, Error{PHUB_ERR_ROUND_MISMATCH,
                          chunk + ": the client is on round " + std::to_string(cs.round) + ", the server on round " +
                              std::to_string(h.aux) + " (" + std::string(proto::status_name(h.status)) +
                              "): the server kept the state of an earlier run of this job (restart it), or the "
                              "workers did not run the same sequence of operations"});
      break;
    case proto::Status::unknown_chunk:
      fail_op(slot, Error{PHUB_ERR_CHUNK_MAP, "the server's job has " + std::to_string(h.aux) +
                                                  " chunks, the client computed " +
                                                  std::to_string(plan_->chunk_count()) + ": " + where()});
      break;
    case proto::Status::bad_request:
      fail_op(slot, bad_request_error(h));
      break;
    case proto::Status::hparams_unknown:
      // The lcore does not hold the round's set (its registration was lost, or the lcore restarted): register
      // it there again, then push the chunk again.
      if (HparamsSet* s = find_set(op.step.hparams); s != nullptr && op.kind == OpKind::step) {
        const uint32_t owner = lane_of(c);
        s->acked[owner] = 0;
        s->sent_ns[owner] = 0;
        const uint64_t now = now_ns();
        ensure_hparams(owner, s->id, now);
        (void)resend_chunk(c, now);
      } else {
        fail_op(slot, Error{PHUB_ERR_PROTOCOL, chunk + ": the server asks for a hyperparameter set this step did not name"});
      }
      break;
    case proto::Status::hparams_mismatch:
      fail_op(slot, Error{PHUB_ERR_HPARAMS, chunk + ", round " + std::to_string(cs.round) + ": the ranks sent different "
                                            "hyperparameters for the round (lr, momentum, betas, eps, weight_decay "
                                            "or the parameter group of the key differ between workers); the server "
                                            "applies none of them"});
      break;
    case proto::Status::nonfinite:
      fail_op(slot, Error{PHUB_ERR_NONFINITE, chunk + ", round " + std::to_string(cs.round) + ": the server refused "
                                              "this rank's push: element " +
                                              std::to_string(plan_->key_elem_offset(c) + h.elem_offset + h.aux) +
                                              " of the key is NaN or Inf and the step did not declare it (the job "
                                              "refuses undeclared non-finite values: declare them, e.g. "
                                              "PSOptimizer's check)"});
      break;
  }
}

}  // namespace phub::client

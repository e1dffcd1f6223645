// A ps client's hyperparameter sets (registered with each server lcore before a push names them) and its
// optimizer-state transfers (state pulls and inits, piece by piece): docs/protocol.md, "Hyperparameters" and
// "Optimizer state".
#include <algorithm>
#include <cstring>

#include "phub/base/bytes.hpp"
#include "phub/client/client.hpp"
#include "phub/client/clock.hpp"
#include "phub/proto/frame.hpp"

namespace phub::client {
namespace {

constexpr size_t kTransferBatch = 64;  // state pieces sent and awaited at once

// The job's optimizer as an hparams refusal's aux names it (the engine's optimizer_code).
std::string optimizer_named(uint32_t code) {
  constexpr const char* kNames[] = {"sgd (torch.optim.SGD without momentum)", "momentum (torch.optim.SGD with momentum)",
                                    "nesterov (torch.optim.SGD with nesterov=True)", "adam (torch.optim.Adam)",
                                    "adamw (torch.optim.AdamW)"};
  return code < std::size(kNames) ? kNames[code] : "unknown (" + std::to_string(code) + ")";
}

}  // namespace

Result<uint64_t> Client::register_hparams(const proto::Hparams& h) {
  if (opt_.mode != Mode::ps) return fail(PHUB_ERR_STATE, "hyperparameter sets need a ps-mode job (config.mode)");
  if (const std::string why = proto::hparams_refusal(h); !why.empty()) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "hyperparameters: " + why);
  }
  const proto::HparamsWire wire = proto::encode_hparams(h);
  const uint64_t id = proto::hparams_id(wire);
  if (find_set(id) != nullptr) return id;
  if (sets_.size() == kKeptSets) {
    // The oldest goes; a registration of it still queued must not read freed memory.
    const std::byte* gone = sets_.front().wire.data();
    unqueue_if([&](const OutPacket& p) { return p.payload == gone; });
    sets_.pop_front();
  }
  HparamsSet s;
  s.id = id;
  s.wire = wire;
  s.acked.assign(members_.size(), 0);
  s.sent_ns.assign(members_.size(), 0);
  sets_.push_back(std::move(s));
  return id;
}

Client::HparamsSet* Client::find_set(uint64_t id) noexcept {
  for (auto it = sets_.rbegin(); it != sets_.rend(); ++it) {
    if (it->id == id) return &*it;
  }
  return nullptr;
}

void Client::ensure_hparams(uint32_t owner, uint64_t id, uint64_t now) {
  HparamsSet* s = find_set(id);
  if (s == nullptr || s->acked[owner] != 0) return;
  if (s->sent_ns[owner] != 0 && now - s->sent_ns[owner] < rto_.rto_ns()) return;
  if (!make_room(1)) return;  // tried again before the next push of a chunk of this lane
  s->sent_ns[owner] = now;
  proto::Header h;
  h.opcode = proto::Opcode::hparams;
  h.dtype = opt_.dtype;
  h.job_id = opt_.job_id;
  h.rank = opt_.rank;
  h.chunk_id = static_cast<uint32_t>(id >> 32);
  h.elem_offset = static_cast<uint32_t>(id);
  h.epoch = members_[owner].epoch;
  h.payload_bytes = static_cast<uint16_t>(proto::kHparamsBytes);
  h.seq = seq_++;
  auto wire = std::span<std::byte, proto::kHeaderBytes>(headers_[queue_.size()].data(), proto::kHeaderBytes);
  proto::write_header(h, wire);
  const Session& session = members_[owner].session;
  if (session.active) {
    seal_for_session(owner, h, wire, s->wire);
  } else if (authenticated_) {
    proto::sign_header(auth_, wire);
  }
  queue_packet(endpoint_of_owner(owner), s->wire.data(), static_cast<uint32_t>(proto::kHparamsBytes), kNone);
}

void Client::on_hparams_answer(const proto::Header& h, uint32_t owner) {
  HparamsSet* s = find_set(proto::id_of_fields(h.chunk_id, h.elem_offset));
  if (s == nullptr || h.payload_bytes != 0) {
    ++st_.stale;
    return;
  }
  s->acked[owner] = 1;
}

bool Client::on_hparams_error(const proto::Header& h) {
  // A refusal of a registration names the set as the registration did (chunk_id and elem_offset) in round 0;
  // a chunk's error names a chunk id below the chunk count, which no set's high half is (ids are random).
  if (h.status != proto::Status::bad_request || h.round != 0 || h.chunk_id < plan_->chunk_count()) return false;
  HparamsSet* s = find_set(proto::id_of_fields(h.chunk_id, h.elem_offset));
  if (s == nullptr) return false;
  s->refused = "the server refused the hyperparameter set: the job's optimizer (its config's optimizer.kind) is " +
               optimizer_named(h.aux) + "; build PSOptimizer for it";
  for (uint32_t slot : std::vector<uint32_t>(live_)) {
    if (ops_[slot].step.hparams == s->id) fail_op(slot, Error{PHUB_ERR_HPARAMS, s->refused});
  }
  return true;
}

// ---- state transfers ----

uint32_t Client::state_piece_elems() const noexcept { return proto::job_segment_elems(opt_.mtu, Dtype::fp32, true); }

Expected<void, Error> Client::state_pull(uint32_t key, uint8_t array, float* dst, uint64_t* step,
                                         std::unique_lock<std::mutex>* lock) {
  transfer_ = Transfer{};
  transfer_.init = false;
  transfer_.dst = reinterpret_cast<std::byte*>(dst);
  transfer_.array = array;
  transfer_.key = key;
  auto r = run_transfer(lock);
  if (r && step != nullptr) *step = transfer_.step;
  return r;
}

Expected<void, Error> Client::state_init(uint32_t key, uint8_t array, const float* src, uint64_t step,
                                         std::unique_lock<std::mutex>* lock) {
  transfer_ = Transfer{};
  transfer_.init = true;
  transfer_.src = reinterpret_cast<const std::byte*>(src);
  transfer_.array = array;
  transfer_.key = key;
  transfer_.step = step;
  store_be<uint64_t>(transfer_.tail.data(), step);
  return run_transfer(lock);
}

Expected<void, Error> Client::run_transfer(std::unique_lock<std::mutex>* lock) {
  if (opt_.mode != Mode::ps) return fail(PHUB_ERR_STATE, "optimizer state needs a ps-mode job (config.mode)");
  if (broken_) return unexpected(*broken_);
  if (!plan_) {
    if (auto f = finalize(); !f) return unexpected(std::move(f).error());
  }
  Transfer& t = transfer_;
  if (t.key >= plan_->key_count()) return fail(PHUB_ERR_INVALID_ARGUMENT, "key " + std::to_string(t.key) + " is not registered");
  if (t.array < static_cast<uint8_t>(proto::StateArray::master) || t.array > proto::kStateArrayMax) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "state array " + std::to_string(t.array) + " is not 1..3");
  }
  if (t.src == nullptr && t.dst == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  const uint32_t piece = state_piece_elems();
  const uint32_t first = plan_->layout().first_chunk(t.key);
  const uint32_t end = first + plan_->layout().key_chunk_count(t.key);
  for (uint32_t c = first; c < end; ++c) {
    for (uint32_t off = 0; off < plan_->layout().chunk(c).elems; off += piece) t.pieces.emplace_back(c, off);
  }
  t.done.assign(t.pieces.size(), 0);
  t.active = true;
  t.deadline_ns = now_ns() + uint64_t{opt_.timeout_ms} * 1000000;  // moved on by every answer
  while (true) {
    const uint64_t now = now_ns();
    pump(now);
    if (t.err) {
      t.active = false;
      return unexpected(*t.err);
    }
    if (t.batch_begin == t.pieces.size()) {
      t.active = false;
      return {};
    }
    if (now >= t.deadline_ns) {
      t.active = false;
      return fail(PHUB_ERR_TIMEOUT, std::string("state ") + (t.init ? "init" : "pull") + " of key " +
                                        std::to_string(t.key) + ": " + std::to_string(t.left_in_batch) +
                                        " pieces unanswered after " + std::to_string(opt_.timeout_ms) + " ms");
    }
    sleep_until(next_wake(now), now, lock);
  }
}

void Client::send_transfer_batch(uint64_t now) {
  Transfer& t = transfer_;
  if (t.left_in_batch == 0) {  // the next batch
    t.batch_begin = t.batch_end;
    t.batch_end = std::min(t.pieces.size(), t.batch_begin + kTransferBatch);
    t.left_in_batch = t.batch_end - t.batch_begin;
    if (t.left_in_batch == 0) return;
  }
  const uint32_t piece = state_piece_elems();
  for (size_t i = t.batch_begin; i < t.batch_end; ++i) {
    if (t.done[i] != 0) continue;
    if (!make_room(1)) break;
    const auto [c, off] = t.pieces[i];
    const uint32_t n = std::min(piece, plan_->layout().chunk(c).elems - off);
    const uint32_t owner = lane_of(c);
    proto::Header h;
    h.opcode = t.init ? proto::Opcode::init : proto::Opcode::pull;
    h.status = static_cast<proto::Status>(t.array);
    h.dtype = Dtype::fp32;
    h.job_id = opt_.job_id;
    h.rank = opt_.rank;
    h.chunk_id = c;
    h.elem_offset = off;
    h.elem_count = static_cast<uint16_t>(n);
    h.epoch = members_[owner].epoch;
    const Session& session = members_[owner].session;
    h.aux = session.active ? 0 : members_[owner].cookie;
    const std::byte* payload = nullptr;
    uint32_t bytes = 0;
    if (t.init) {
      h.flags = proto::flag::tail;
      payload = t.src + (plan_->key_elem_offset(c) + off) * sizeof(float);
      bytes = n * sizeof(float);
      h.payload_bytes = static_cast<uint16_t>(bytes + proto::kTailBytes);
    }
    h.seq = seq_++;
    const size_t q = queue_.size();
    auto wire = std::span<std::byte, proto::kHeaderBytes>(headers_[q].data(), proto::kHeaderBytes);
    proto::write_header(h, wire);
    const uint32_t tail_bytes = t.init ? static_cast<uint32_t>(proto::kTailBytes) : 0u;
    std::memcpy(headers_[q].data() + proto::kHeaderBytes, t.tail.data(), tail_bytes);
    if (session.active) {
      seal_for_session(owner, h, wire, std::span(payload, bytes), std::span(t.tail.data(), tail_bytes));
    } else if (authenticated_) {
      proto::sign_header(auth_, wire);
    }
    queue_packet(endpoint_of_owner(owner), payload, bytes, kNone, tail_bytes);
  }
  t.resend_ns = now + rto_.rto_ns();
}

void Client::service_transfer(uint64_t now) {
  if (!transfer_.active || transfer_.err || !all_joined()) return;
  if (transfer_.left_in_batch == 0 || now >= transfer_.resend_ns) {
    if (transfer_.left_in_batch != 0) st_.retransmits += transfer_.left_in_batch;
    send_transfer_batch(now);
  }
}

void Client::on_state_result(const proto::Header& h, std::span<const std::byte> payload) {
  Transfer& t = transfer_;
  const uint32_t piece = state_piece_elems();
  if (!t.active || static_cast<uint8_t>(h.status) != t.array || (h.flags & proto::flag::tail) == 0 || h.dtype != Dtype::fp32) {
    ++st_.stale;
    return;
  }
  size_t i = t.batch_begin;
  while (i < t.batch_end && !(t.pieces[i].first == h.chunk_id && t.pieces[i].second == h.elem_offset)) ++i;
  const uint32_t n = i < t.batch_end ? std::min(piece, plan_->layout().chunk(h.chunk_id).elems - h.elem_offset) : 0;
  if (i == t.batch_end || t.done[i] != 0 || h.elem_count != n) {
    ++st_.duplicates;
    return;
  }
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const uint64_t step = load_be<uint64_t>(payload.data() + bytes);
  const size_t at = (plan_->key_elem_offset(h.chunk_id) + h.elem_offset) * sizeof(float);
  if (t.init) {
    // The answer is the piece as the server holds it now: a server that trained the job already kept its own.
    if (step != t.step || std::memcmp(payload.data(), t.src + at, bytes) != 0) {
      t.err = Error{PHUB_ERR_STATE, "state init of key " + std::to_string(t.key) + ": the server kept its own state "
                                    "(step " + std::to_string(step) + "): it has trained the job already; an "
                                    "optimizer state is loaded only into a server that does not hold the job "
                                    "(a fresh server, or a restart with fresh weights)"};
      return;
    }
  } else {
    if (t.step_seen && step != t.step) {
      t.err = Error{PHUB_ERR_STATE, "state pull of key " + std::to_string(t.key) + ": the chunks' optimizer step "
                                    "counts differ (" + std::to_string(t.step) + " and " + std::to_string(step) +
                                    "): read the state between steps"};
      return;
    }
    t.step = step;
    t.step_seen = true;
    std::memcpy(t.dst + at, payload.data(), bytes);
  }
  t.done[i] = 1;
  const uint64_t now = now_ns();
  t.deadline_ns = now + uint64_t{opt_.timeout_ms} * 1000000;
  if (--t.left_in_batch == 0) send_transfer_batch(now);
}

}  // namespace phub::client

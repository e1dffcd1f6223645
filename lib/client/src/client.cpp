// The client's public operations: connect, keys, posting and waiting for requests, push/pull, stats.
#include "phub/client/client.hpp"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "phub/client/clock.hpp"
#include "phub/proto/frame.hpp"

namespace phub::client {

namespace {

// The first window, in packets of the MTU: like a TCP sender's initial burst, a few dozen packets.
constexpr uint64_t kInitialWindowPackets = 64;

uint64_t packet_payload_bytes(const Options& o) noexcept {
  return uint64_t{proto::job_segment_elems(o.mtu, o.dtype, o.mode == Mode::ps)} * dtype_bytes(o.dtype);
}

}  // namespace

Client::Client(const Options& o)
    : opt_(o),
      window_(o.window_packets * packet_payload_bytes(o), kMinWindowPackets * packet_payload_bytes(o),
              kInitialWindowPackets * packet_payload_bytes(o)),
      rto_(o.rto_initial_us, o.rto_min_us, o.rto_max_us) {}

Result<std::unique_ptr<Client>> Client::connect(const Options& o) {
  if (auto v = validate(o); !v) return unexpected(v.error());
  auto t = Transport::open(o);
  if (!t) return unexpected(std::move(t).error());
  std::unique_ptr<Client> c(new Client(o));
  c->transport_ = std::move(*t);
  c->authenticated_ = !o.secret.empty();
  if (c->authenticated_) {
    c->auth_ = proto::derive_key(o.secret, o.job_id);
    c->handshake_auth_ = proto::handshake_key(c->auth_);
  }
  c->queue_cap_ = 1024;
  c->headers_.resize(c->queue_cap_);
  c->queue_.reserve(c->queue_cap_);
  c->start_joining(now_ns());
  if (o.rank == 0 && o.restart_job) {
    // Rank 0 starts its run's epoch when it connects, as the other ranks expect: the server takes a start
    // only as the confirm of its own challenge (docs/protocol.md), so the client answers it here, within the
    // deadline, instead of at its first operation. A server that does not answer in time is not an error yet:
    // the first operation waits for it and reports what went wrong.
    (void)c->pump_joins_until(now_ns() + uint64_t{o.timeout_ms} * 1000000, nullptr);
  }
  return c;
}

Client::~Client() {
  queue_.clear();  // nothing of an operation goes out any more
  // Also to lcores whose join answer never came: the join itself may have arrived.
  for (uint32_t o = 0; o < members_.size(); ++o) {
    if (!queue_room(1)) flush();
    if (queue_room(1)) enqueue_control(proto::Opcode::leave, o, 0, members_[o].epoch, incarnation_);
  }
  flush();
}

Expected<void, Error> Client::register_key(uint32_t key, uint64_t elems, Dtype d) {
  if (plan_) return fail(PHUB_ERR_STATE, "keys are frozen by the first operation: register every key before it");
  if (key != key_elems_.size()) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "keys are registered in the order of the job's keys: expected key " +
                                               std::to_string(key_elems_.size()) + ", got " + std::to_string(key));
  }
  if (elems == 0 || elems > (uint64_t{1} << 31)) return fail(PHUB_ERR_INVALID_ARGUMENT, "key elems must be 1..2^31");
  if (d != opt_.dtype) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "key dtype " + std::string(dtype_name(d)) + " differs from the job's dtype " +
                                               std::string(dtype_name(opt_.dtype)));
  }
  key_elems_.push_back(elems);
  return {};
}

Result<uint32_t> Client::finalize() {
  if (plan_) return plan_->chunk_count();
  auto p = Plan::build(opt_, key_elems_);
  if (!p) return unexpected(std::move(p).error());
  plan_ = std::move(*p);
  chunks_.assign(plan_->chunk_count(), ChunkState{});
  for (uint32_t c = 0; c < chunks_.size(); ++c) chunks_[c].round = members_[lane_of(c)].first_round;  // 0 until joined
  tracker_.resize(plan_->total_segments());
  lanes_.resize(owner_count(opt_), plan_->chunk_count());
  uint32_t max_segments = 0;
  uint64_t max_chunk_bytes = 0;
  for (const auto& c : plan_->layout().chunks()) {
    max_segments = std::max(max_segments, c.segments);
    max_chunk_bytes = std::max<uint64_t>(max_chunk_bytes, uint64_t{c.elems} * plan_->elem_bytes());
  }
  // The floor is two chunks (a chunk always fits when nothing is in flight); growth is one chunk per window.
  const uint64_t packet_bytes = packet_payload_bytes(opt_);
  window_.reset(std::max<uint64_t>(opt_.window_packets * packet_bytes, 2 * max_chunk_bytes), 2 * max_chunk_bytes,
                kInitialWindowPackets * packet_bytes);
  window_.set_step(max_chunk_bytes);
  window_.set_delay_target(uint64_t{opt_.delay_target_us} * 1000);
  queue_cap_ = std::max<size_t>(queue_cap_, max_segments + 64);
  headers_.resize(queue_cap_);
  queue_.reserve(queue_cap_);
  for (size_t i = 0; i < queue_.size(); ++i) queue_[i].header = headers_[i].data();
  stash_.resize(key_elems_.size());
  pending_push_.resize(key_elems_.size());
  return plan_->chunk_count();
}

Client::Op* Client::lookup(OpId id) noexcept {
  if (id.slot >= ops_.size() || !ops_[id.slot].used || ops_[id.slot].gen != id.gen) return nullptr;
  return &ops_[id.slot];
}

Result<OpId> Client::post(OpKind kind, uint32_t key, const std::byte* src, std::byte* dst, const StepSettings& step) {
  if (broken_) return unexpected(*broken_);
  if (resume_ == Resume::pending) return fail(PHUB_ERR_RESUMED, resume_why_);
  if (!plan_) {
    if (auto f = finalize(); !f) return unexpected(std::move(f).error());
  }
  if (key >= plan_->key_count()) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "key " + std::to_string(key) + " is not registered (" +
                                               std::to_string(plan_->key_count()) + " keys)");
  }
  const bool ps = opt_.mode == Mode::ps;
  if (ps == (kind == OpKind::allreduce)) {
    return fail(PHUB_ERR_STATE, ps ? "allreduce needs an allreduce-mode job (config.mode is ps: use step)"
                                   : "init, step and pull need a ps-mode job (config.mode is allreduce)");
  }
  if ((step.hparams != 0 || step.nonfinite) && kind != OpKind::step) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "hyperparameters and a non-finite declaration belong to a ps step");
  }
  if (step.hparams != 0) {
    const HparamsSet* s = find_set(step.hparams);
    if (s == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "hyperparameter set " + std::to_string(step.hparams) + " is not registered");
    if (!s->refused.empty()) return fail(PHUB_ERR_HPARAMS, s->refused);
  }
  const bool needs_src = kind != OpKind::pull;
  const bool needs_dst = kind != OpKind::init_send;
  if ((needs_src && src == nullptr) || (needs_dst && dst == nullptr)) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  }
  uint32_t slot;
  if (!free_ops_.empty()) {
    slot = free_ops_.back();
    free_ops_.pop_back();
  } else {
    slot = static_cast<uint32_t>(ops_.size());
    ops_.emplace_back();
  }
  Op& op = ops_[slot];
  const uint32_t gen = op.gen + 1;
  op = Op{};
  op.gen = gen;
  op.used = true;
  op.kind = kind;
  op.key = key;
  op.src = src;
  op.dst = dst;
  op.step = step;
  op.first_chunk = plan_->layout().first_chunk(key);
  op.next_chunk = op.first_chunk;
  op.end_chunk = op.next_chunk + plan_->layout().key_chunk_count(key);
  op.chunks_left = op.end_chunk - op.next_chunk;
  const uint64_t now = now_ns();
  op.deadline_ns = now + uint64_t{opt_.timeout_ms} * 1000000;
  live_.push_back(slot);
  waiting_.push_back(slot);
  pump(now);  // start sending now: an asynchronous request makes progress before its first wait
  return OpId{slot, gen};
}

Expected<void, Error> Client::wait(OpId id, std::unique_lock<std::mutex>* lock, bool* skipped) {
  if (lookup(id) == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "unknown or already finished request");
  while (true) {
    const uint64_t now = now_ns();
    pump(now);
    if (ops_[id.slot].done) {
      if (skipped != nullptr) *skipped = ops_[id.slot].skipped;
      Error e = std::move(ops_[id.slot].err);
      release(id);
      if (e.code != PHUB_OK) return unexpected(std::move(e));
      return {};
    }
    sleep_until(next_wake(now), now, lock);
    if (lookup(id) == nullptr) return fail(PHUB_ERR_STATE, "request released by another thread");
  }
}

Result<bool> Client::test(OpId id) {
  if (lookup(id) == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "unknown or already finished request");
  pump(now_ns());
  return ops_[id.slot].done;
}

void Client::release(OpId id) {
  Op* op = lookup(id);
  if (op == nullptr) return;
  if (!op->done) fail_op(id.slot, Error{PHUB_ERR_STATE, "request abandoned before it completed"});
  op->used = false;
  op->err = Error{};
  free_ops_.push_back(id.slot);
}

Expected<void, Error> Client::push(uint32_t key, const std::byte* src) {
  if (!plan_) {
    if (auto f = finalize(); !f) return unexpected(std::move(f).error());
  }
  if (key >= plan_->key_count()) return fail(PHUB_ERR_INVALID_ARGUMENT, "key " + std::to_string(key) + " is not registered");
  if (pending_push_[key]) {
    return fail(PHUB_ERR_STATE, "phub_push on key " + std::to_string(key) + " twice without phub_pull in between");
  }
  auto& stash = stash_[key];
  stash.resize(plan_->key_elems(key) * plan_->elem_bytes());  // allocated once per key
  auto id = post(opt_.mode == Mode::ps ? OpKind::step : OpKind::allreduce, key, src, stash.data());
  if (!id) return unexpected(std::move(id).error());
  pending_push_[key] = *id;
  return {};
}

Expected<void, Error> Client::pull(uint32_t key, std::byte* dst, std::unique_lock<std::mutex>* lock) {
  if (dst == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (plan_ && key < plan_->key_count() && pending_push_[key]) {
    const OpId id = *pending_push_[key];
    pending_push_[key].reset();
    if (auto r = wait(id, lock); !r) return r;
    std::memcpy(dst, stash_[key].data(), stash_[key].size());
    return {};
  }
  if (opt_.mode != Mode::ps) return fail(PHUB_ERR_STATE, "phub_pull without a pending phub_push (allreduce mode)");
  auto id = post(OpKind::pull, key, nullptr, dst);
  if (!id) return unexpected(std::move(id).error());
  return wait(*id, lock);
}

void Client::sleep_until(uint64_t wake_ns, uint64_t now, std::unique_lock<std::mutex>* lock) {
  constexpr uint64_t kMaxSleepNs = 50'000'000;  // re-check at least every 50 ms
  const uint64_t ns = wake_ns <= now ? 0 : std::min(wake_ns - now, kMaxSleepNs);
  pollfd p{transport_->fd(), static_cast<short>(POLLIN | (send_blocked_ ? POLLOUT : 0)), 0};
  const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  if (lock != nullptr) lock->unlock();
  (void)ppoll(&p, 1, &ts, nullptr);
  if (lock != nullptr) lock->lock();
}

phub_stats Client::stats() const noexcept {
  phub_stats s = st_;
  const auto& t = transport_->counters();
  s.packets_sent = t.packets_sent;
  s.packets_received = t.packets_received;
  s.send_batches = t.send_batches;
  s.recv_batches = t.recv_batches;
  s.gro_coalesced = t.gro_coalesced;
  s.window_packets = static_cast<uint32_t>(window_.cwnd() / std::max<uint64_t>(packet_payload_bytes(opt_), 1));
  s.srtt_us = static_cast<uint32_t>(rto_.srtt_ns() / 1000);
  s.rto_us = static_cast<uint32_t>(rto_.rto_ns() / 1000);
  s.gso = transport_->gso() ? 1 : 0;
  s.gro = transport_->gro() ? 1 : 0;
  s.reorder_window_us = static_cast<uint32_t>(reorder_window_ns() / 1000);
  s.epoch = members_.empty() ? 0 : members_[0].epoch;
  s.resumes = resumes_;
  s.rejoins = rejoins_;
  return s;
}

}  // namespace phub::client

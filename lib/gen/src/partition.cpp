// The emulated workers' state machine: closed loop, open loop, ps initialisation, settling.
#include "phub/gen/partition.hpp"

#include <algorithm>
#include <cstring>

namespace phub::gen {
namespace {

constexpr uint64_t kTimerPeriodNs = 100'000;      // how often timeouts are looked at
constexpr uint64_t kInitRtoNs = 50'000'000;       // ps init: rank 0 resends unanswered inits after this
constexpr uint64_t kInitQuietNs = 50'000'000;     // after resent inits, let late duplicates drain first

}  // namespace

Partition::Partition(const Workload& wl, std::span<const uint16_t> owners)
    : wl_(&wl), slots_(wl, owners), verifier_(wl, slots_), nslots_(slots_.size()), nworkers_(wl.spec().workers) {
  acked_.assign(size_t{nworkers_} * nslots_, 0);
  sent_ns_.assign(acked_.size(), 0);
  workers_.resize(nworkers_);
  initialized_ = wl.spec().mode != Mode::ps;
  init_acked_.assign(nslots_, false);
}

double Partition::rand01() noexcept {  // xorshift64*
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return static_cast<double>((rng_ * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53;
}

void Partition::start(const Knobs& knobs, uint64_t now_ns) {
  if (phase_ != Phase::idle) return;
  knobs_ = knobs;
  knobs_.window = std::max<uint32_t>(knobs_.window, 1);
  rng_ = (knobs.seed + 1) * 0x9e3779b97f4a7c15ull ^ wl_->spec().id;
  if (rng_ == 0) rng_ = 1;
  order_.clear();
  if (knobs_.reorder) {
    order_.resize(acked_.size());
    for (uint16_t r = 0; r < nworkers_; ++r) {
      uint32_t* o = order_.data() + idx(r, 0);
      for (uint32_t i = 0; i < nslots_; ++i) o[i] = i;
      // Shuffle within blocks of one window: every worker's first window covers the same segments, so
      // they complete (a whole-round shuffle would let the windows of different workers never meet).
      for (uint32_t b = 0; b < nslots_; b += knobs_.window) {
        const uint32_t len = std::min(knobs_.window, nslots_ - b);
        for (uint32_t i = len; i > 1; --i) std::swap(o[b + i - 1], o[b + static_cast<uint32_t>(rand01() * i) % i]);
      }
    }
  }
  next_timer_ns_ = now_ns;
  if (nslots_ == 0) return;  // nothing of this job on this lcore: always settled
  if (!initialized_) {
    phase_ = Phase::init;
    after_init_ = Phase::running;
    init_cursor_ = 0;
    init_inflight_ = 0;
    init_pending_ = static_cast<uint32_t>(std::count(init_acked_.begin(), init_acked_.end(), false));
    init_progress_ns_ = now_ns;
    return;
  }
  enter_running(now_ns);
}

void Partition::enter_running(uint64_t now_ns) {
  phase_ = Phase::running;
  idle_workers_ = 0;
  for (auto& w : workers_) {
    w.idle = false;
    w.rounds_done = 0;
    begin_round(w, next_round_, now_ns);
  }
  open_round_ = next_round_;
  open_pos_ = 0;
  open_rank_ = 0;
}

void Partition::begin_round(Worker& w, uint64_t round, uint64_t now_ns) noexcept {
  w.round = round;
  w.cursor = 0;
  w.inflight = 0;
  w.remaining = nslots_;
  w.retx_pos = kNone;
  w.round_start_ns = now_ns;
  w.last_progress_ns = now_ns;
  w.rto_ns = knobs_.rto_ns;
}

void Partition::drain() noexcept {
  if (phase_ == Phase::running && knobs_.mode == LoopMode::open) phase_ = Phase::draining;
}

void Partition::finish(uint64_t now_ns) {
  if (phase_ == Phase::idle || phase_ == Phase::finishing) return;
  if (phase_ == Phase::init) {
    after_init_ = Phase::idle;  // complete the initialisation, then stop
    return;
  }
  phase_ = Phase::finishing;
  if (knobs_.mode == LoopMode::closed) {
    goal_ = next_round_;
    for (const auto& w : workers_) {
      const bool started = !w.idle && (w.cursor > 0 || w.remaining < nslots_);
      goal_ = std::max(goal_, started ? w.round + 1 : w.round);
    }
    for (auto& w : workers_) {
      if (w.idle && w.round < goal_) {  // finished its own rounds, but someone began a later one
        w.idle = false;
        --idle_workers_;
        begin_round(w, w.round, now_ns);
      } else if (!w.idle && w.cursor == 0 && w.remaining == nslots_ && w.round >= goal_) {
        w.idle = true;
        ++idle_workers_;
      }
    }
  } else {
    const bool started = open_pos_ > 0 || open_rank_ > 0;
    goal_ = std::max(next_round_, started ? open_round_ + 1 : open_round_);
    unsettled_ = static_cast<uint64_t>(std::count_if(acked_.begin(), acked_.end(), [&](uint64_t a) { return a < goal_; }));
    repair_.clear();
    scan_pos_ = SIZE_MAX;
    next_scan_ns_ = now_ns;
  }
  maybe_settled();
}

void Partition::maybe_settled() noexcept {
  if (phase_ != Phase::finishing) return;
  const bool done = knobs_.mode == LoopMode::closed ? idle_workers_ == nworkers_ : unsettled_ == 0;
  if (!done) return;
  phase_ = Phase::idle;
  next_round_ = goal_;
}

size_t Partition::emit(std::span<PushOrder> out, size_t n, uint16_t rank, uint32_t slot, uint64_t round,
                       bool retransmit, uint64_t now_ns) {
  const uint64_t bytes = slots_[slot].elems * wl_->in_bytes();
  // Written field by field: a whole-struct copy of an order just assembled from narrower stores would
  // stall on store forwarding, once per push.
  PushOrder& o = out[n];
  o.rank = rank;
  o.slot = slot;
  o.round = round;
  o.init = false;
  o.retransmit = retransmit;
  o.drop = false;
  stats_.pushes.add();
  stats_.push_bytes.add(bytes);
  (retransmit ? stats_.retransmits : stats_.originals).add();
  sent_ns_[idx(rank, slot)] = now_ns | 1;
  max_pushed_ = std::max(max_pushed_, round);
  if (knobs_.loss > 0 && rand01() < knobs_.loss) {
    o.drop = true;
    stats_.dropped.add();
  }
  if (o.drop || knobs_.dup <= 0 || n + 1 >= out.size() || rand01() >= knobs_.dup) return 1;
  out[n + 1] = o;
  stats_.duplicated.add();
  stats_.pushes.add();
  stats_.push_bytes.add(bytes);
  return 2;
}

size_t Partition::poll(uint64_t now_ns, std::span<PushOrder> out) {
  if (now_ns >= next_timer_ns_) {
    next_timer_ns_ = now_ns + kTimerPeriodNs;
    if (phase_ == Phase::init && init_pending_ > 0 && now_ns - init_progress_ns_ > std::max(knobs_.rto_ns, kInitRtoNs)) {
      init_cursor_ = 0;  // resend every unanswered init
      init_inflight_ = 0;
      init_retransmitted_ = true;
      init_progress_ns_ = now_ns;
    }
    if ((phase_ == Phase::running || phase_ == Phase::finishing) && knobs_.mode == LoopMode::closed) {
      timers_closed(now_ns);
    }
    if (phase_ == Phase::finishing && knobs_.mode == LoopMode::open && now_ns >= next_scan_ns_ && scan_pos_ == SIZE_MAX) {
      scan_pos_ = 0;
      next_scan_ns_ = now_ns + knobs_.rto_ns;
    }
  }
  if (now_ns < quiet_until_ns_) return 0;
  switch (phase_) {
    case Phase::init: return poll_init(now_ns, out);
    case Phase::running:
      return knobs_.mode == LoopMode::closed ? poll_closed(now_ns, out) : 0;
    case Phase::finishing:
      return knobs_.mode == LoopMode::closed ? poll_closed(now_ns, out) : poll_repair(now_ns, out);
    default: return 0;
  }
}

void Partition::timers_closed(uint64_t now_ns) {
  for (auto& w : workers_) {
    if (w.idle || w.remaining == 0 || now_ns - w.last_progress_ns <= w.rto_ns) continue;
    w.retx_pos = 0;
    w.rto_ns = std::min(w.rto_ns * 2, knobs_.rto_max_ns);
    w.last_progress_ns = now_ns;
  }
}

size_t Partition::poll_init(uint64_t now_ns, std::span<PushOrder> out) {
  (void)now_ns;
  size_t n = 0;
  while (n < out.size() && init_cursor_ < nslots_ && init_inflight_ < knobs_.window) {
    const uint32_t s = init_cursor_++;
    if (init_acked_[s]) continue;
    out[n++] = PushOrder{0, s, 0, true, init_retransmitted_, false};
    ++init_inflight_;
    stats_.inits.add();
    stats_.pushes.add();
    stats_.push_bytes.add(slots_[s].elems * wl_->in_bytes());
  }
  return n;
}

size_t Partition::poll_closed(uint64_t now_ns, std::span<PushOrder> out) {
  size_t n = 0;
  uint32_t misses = 0;
  while (n < out.size() && misses < nworkers_) {
    const uint16_t r = rr_;
    rr_ = static_cast<uint16_t>(rr_ + 1 == nworkers_ ? 0 : rr_ + 1);
    Worker& w = workers_[r];
    if (w.idle) {
      ++misses;
      continue;
    }
    if (w.retx_pos != kNone) {
      uint32_t pos = w.retx_pos;
      while (pos < w.cursor && acked_[idx(r, order_at(r, pos))] > w.round) ++pos;
      if (pos < w.cursor) {
        n += emit(out, n, r, order_at(r, pos), w.round, true, now_ns);
        w.retx_pos = pos + 1;
        misses = 0;
        continue;
      }
      w.retx_pos = kNone;
    }
    if (w.cursor < nslots_ && w.inflight < knobs_.window) {
      if (w.cursor == 0) w.round_start_ns = now_ns;
      const uint32_t slot = order_at(r, w.cursor++);
      ++w.inflight;
      n += emit(out, n, r, slot, w.round, false, now_ns);
      misses = 0;
    } else {
      ++misses;
    }
  }
  return n;
}

size_t Partition::poll_repair(uint64_t now_ns, std::span<PushOrder> out) {
  size_t n = 0;
  auto repush = [&](size_t i) {
    const auto rank = static_cast<uint16_t>(i / nslots_);
    const auto slot = static_cast<uint32_t>(i % nslots_);
    n += emit(out, n, rank, slot, acked_[i], true, now_ns);
  };
  while (n < out.size() && !repair_.empty()) {
    const size_t i = repair_.back();
    repair_.pop_back();
    if (acked_[i] < goal_) repush(i);
  }
  while (n < out.size() && scan_pos_ < acked_.size()) {
    const size_t i = scan_pos_++;
    if (acked_[i] < goal_ && now_ns - sent_ns_[i] >= knobs_.rto_ns) repush(i);
  }
  if (scan_pos_ >= acked_.size()) scan_pos_ = SIZE_MAX;
  return n;
}

size_t Partition::open_pushes(uint64_t now_ns, std::span<PushOrder> out) {
  if (knobs_.mode != LoopMode::open || now_ns < quiet_until_ns_) return 0;
  // Draining still completes the segment in progress: its first ranks' pushes could never be answered.
  const bool draining = phase_ == Phase::draining && open_rank_ != 0;
  if (phase_ != Phase::running && !draining) return 0;
  size_t n = 0;
  while (n < out.size() && (!draining || open_rank_ != 0)) {
    uint16_t rank = open_rank_;
    if (knobs_.reorder) rank = static_cast<uint16_t>((rank + (open_pos_ * 7 + open_round_) % nworkers_) % nworkers_);
    n += emit(out, n, rank, open_pos_, open_round_, false, now_ns);
    if (++open_rank_ < nworkers_) continue;
    open_rank_ = 0;
    if (++open_pos_ < nslots_) continue;
    open_pos_ = 0;
    ++open_round_;
  }
  return n;
}

Outcome Partition::classify(Check c) noexcept {
  switch (c) {
    case Check::ok: stats_.results_ok.add(); return Outcome::ok;
    case Check::mismatch: stats_.mismatches.add(); return Outcome::mismatch;
    case Check::unverifiable: stats_.unverifiable.add(); return Outcome::unverifiable;
  }
  return Outcome::unverifiable;
}

Outcome Partition::on_init_ack(uint32_t slot, std::span<const std::byte> payload, uint64_t now_ns) {
  const Outcome o = classify(verifier_.check_init_ack(slot, payload));
  if (init_acked_[slot]) {
    stats_.results_dup.add();
    return o == Outcome::ok ? Outcome::duplicate : o;
  }
  init_acked_[slot] = true;
  init_progress_ns_ = now_ns;
  if (init_inflight_ > 0) --init_inflight_;
  if (--init_pending_ > 0 || phase_ != Phase::init) return o;
  initialized_ = true;
  if (init_retransmitted_) quiet_until_ns_ = now_ns + kInitQuietNs;
  if (after_init_ == Phase::idle) {
    phase_ = Phase::idle;
  } else {
    enter_running(now_ns);
  }
  return o;
}

bool Partition::stale_init_ack(uint32_t slot, std::span<const std::byte> payload) {
  const auto ack = verifier_.expected_init_ack(slot);
  return ack.size() == payload.size() && std::memcmp(ack.data(), payload.data(), ack.size()) == 0;
}

bool Partition::answered(uint16_t rank, uint32_t slot, uint64_t logical, uint64_t now_ns, bool with_result) {
  const size_t i = idx(rank, slot);
  if (acked_[i] > logical) return false;
  const bool settling_open = phase_ == Phase::finishing && knobs_.mode == LoopMode::open;
  const bool was_unsettled = acked_[i] < goal_;
  acked_[i] = logical + 1;
  if (with_result) {
    stats_.first_results.add();
    stats_.goodput_bytes.add(slots_[slot].elems * wl_->in_bytes());
  } else {
    stats_.results_lost.add();
  }
  if (settling_open && was_unsettled) {
    if (acked_[i] >= goal_) {
      --unsettled_;
      maybe_settled();
    } else {
      repair_.push_back(i);  // push the next round of this segment now
    }
    return true;
  }
  Worker& w = workers_[rank];
  if (knobs_.mode != LoopMode::closed || logical != w.round || w.idle) return true;
  if (w.inflight > 0) --w.inflight;
  w.last_progress_ns = now_ns;
  w.rto_ns = knobs_.rto_ns;
  if (--w.remaining == 0) round_done(w, now_ns);
  return true;
}

void Partition::round_done(Worker& w, uint64_t now_ns) {
  stats_.rounds.add();
  stats_.round_ns.record(now_ns - w.round_start_ns);
  ++w.rounds_done;
  const uint64_t next = w.round + 1;
  const bool stop = (phase_ == Phase::finishing && next >= goal_) ||
                    (knobs_.max_rounds != 0 && w.rounds_done >= knobs_.max_rounds);
  if (!stop) {
    begin_round(w, next, now_ns);
    return;
  }
  w.round = next;
  w.remaining = 0;
  w.idle = true;
  ++idle_workers_;
  maybe_settled();
}

Outcome Partition::on_result(uint16_t rank, uint32_t slot, uint32_t wire_round, std::span<const std::byte> payload,
                             uint64_t now_ns) {
  stats_.results.add();
  if (rank >= nworkers_ || slot >= nslots_) {
    stats_.results_unexpected.add();
    return Outcome::unexpected;
  }
  // Init acknowledgements carry the round before the first. Only with a round modulus can a result carry
  // the same number (round modulus - 1, and its wraps); a late copy of a resent init's answer then shows
  // itself by its payload.
  const bool init_label = rank == 0 && wl_->spec().mode == Mode::ps && wire_round == wl_->init_ack_round();
  if (!initialized_ || (init_label && (wl_->spec().round_modulus == 0 || sent_ns_[idx(0, slot)] == 0))) {
    return on_init_ack(slot, payload, now_ns);
  }
  if (init_label && init_retransmitted_ && stale_init_ack(slot, payload)) {
    stats_.results_dup.add();
    return Outcome::duplicate;
  }
  const uint64_t ref = knobs_.mode == LoopMode::closed ? workers_[rank].round : max_pushed_;
  const uint64_t logical = wl_->logical_round(wire_round, ref);
  if (logical > max_pushed_ || sent_ns_[idx(rank, slot)] == 0) {
    stats_.results_unexpected.add();
    return Outcome::unexpected;
  }
  const Outcome o = classify(verifier_.check_result(rank, slot, logical, payload));
  if (!answered(rank, slot, logical, now_ns, true)) {
    stats_.results_dup.add();
    return o == Outcome::ok ? Outcome::duplicate : o;
  }
  return o;
}

void Partition::on_error(uint16_t rank, int64_t slot, uint32_t wire_round, proto::Status status, uint64_t now_ns) {
  const auto s = static_cast<size_t>(status);
  if (s < stats_.errors.size()) stats_.errors[s].add();
  if (status != proto::Status::round_behind || slot < 0 || rank >= nworkers_ || !initialized_) return;
  // The server is past this round and no longer holds its result: the answer was lost for good.
  const uint64_t ref = knobs_.mode == LoopMode::closed ? workers_[rank].round : max_pushed_;
  const uint64_t logical = wl_->logical_round(wire_round, ref);
  if (logical > max_pushed_) return;
  (void)answered(rank, static_cast<uint32_t>(slot), logical, now_ns, false);
}

std::string Partition::describe() const {
  static constexpr const char* kPhases[] = {"idle", "init", "running", "draining", "finishing"};
  std::string s = std::string("phase ") + kPhases[static_cast<int>(phase_)] + ", " + std::to_string(nslots_) +
                  " segments, next round " + std::to_string(next_round_);
  if (!initialized_) s += ", init pending " + std::to_string(init_pending_);
  if (phase_ == Phase::finishing) s += ", goal " + std::to_string(goal_) + ", unsettled " + std::to_string(unsettled_);
  for (uint16_t r = 0; r < nworkers_ && r < 16; ++r) {
    const Worker& w = workers_[r];
    s += "; rank " + std::to_string(r) + (w.idle ? " idle" : "") + " round " + std::to_string(w.round) + " waits " +
         std::to_string(w.remaining) + " inflight " + std::to_string(w.inflight) + " cursor " + std::to_string(w.cursor) +
         " rto " + std::to_string(w.rto_ns / 1000) + "us";
  }
  return s;
}

}  // namespace phub::gen

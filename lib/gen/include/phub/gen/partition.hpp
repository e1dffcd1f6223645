// The emulated workers of one job on one generator lcore: every rank, restricted to the chunks owned by
// the server lcores this generator lcore drives. A state machine without I/O: it says which pushes to send
// and digests the results and errors that come back (verifying every result).
//
// Closed loop: each worker pushes its round (at most `window` unanswered pushes), waits for every result,
// then starts the next round; a worker without progress for an RTO resends what is unanswered (backoff).
// Open loop: pushes follow a lockstep schedule (round, segment, rank) at whatever rate the caller asks
// for, whether or not results come back. Stopping settles: the closed loop finishes the highest round any
// worker started; the open loop drains, then repairs every worker/segment up to its last round, so the
// next run (of either kind) starts with the server and the workers in the same round.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/gen/counters.hpp"
#include "phub/gen/slots.hpp"
#include "phub/gen/verifier.hpp"
#include "phub/gen/workload.hpp"
#include "phub/proto/header.hpp"

namespace phub::gen {

enum class LoopMode : uint8_t { closed, open };

struct Knobs {
  LoopMode mode = LoopMode::closed;
  uint32_t window = 64;                 // closed loop: unanswered pushes per worker
  uint64_t rto_ns = 5'000'000;          // first retransmit timeout; doubles without progress
  uint64_t rto_max_ns = 200'000'000;
  double loss = 0;                      // fraction of pushes not transmitted (the RTO recovers them)
  double dup = 0;                       // fraction of pushes transmitted twice
  bool reorder = false;                 // each worker shuffles its segments (within each window's worth)
  uint64_t max_rounds = 0;              // closed loop: rounds per worker in this run (0: until stopped)
  uint64_t seed = 1;
};

struct PushOrder {
  uint16_t rank = 0;
  uint32_t slot = 0;
  uint64_t round = 0;       // logical
  bool init = false;        // ps: rank 0's initial weights instead of a gradient
  bool retransmit = false;
  bool drop = false;        // loss injection: counted as sent, must not be transmitted
};

enum class Outcome : uint8_t { ok, mismatch, duplicate, unexpected, unverifiable };

struct PartitionStats {
  Counter pushes;          // orders produced, retransmits and injected copies included
  Counter originals;       // first transmissions of a (rank, segment, round)
  Counter push_bytes;      // payload bytes of `pushes`
  Counter dropped;         // loss injection
  Counter duplicated;      // extra copies (dup injection)
  Counter retransmits;
  Counter inits;           // init packets (ps)
  Counter results;         // every result received
  Counter results_ok;
  Counter mismatches;
  Counter results_dup;     // result for a (rank, segment, round) already answered (verified too)
  Counter results_unexpected;
  Counter unverifiable;
  Counter first_results;   // results that answered a push for the first time
  Counter goodput_bytes;   // push payload bytes of those
  Counter rounds;          // worker rounds completed (closed loop)
  Counter results_lost;    // answers skipped: the server had moved on (round_behind) before a lost result
  std::array<Counter, proto::kStatusMax + 1> errors;  // error replies by status
  Histogram round_ns;      // closed loop: first push to last result of a worker's round
};

enum class Phase : uint8_t { idle, init, running, draining, finishing };

class Partition {
 public:
  Partition(const Workload& wl, std::span<const uint16_t> owners);
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;

  [[nodiscard]] const Workload& workload() const noexcept { return *wl_; }
  [[nodiscard]] const SlotMap& slots() const noexcept { return slots_; }
  [[nodiscard]] Phase phase() const noexcept { return phase_; }
  [[nodiscard]] bool settled() const noexcept { return phase_ == Phase::idle; }
  [[nodiscard]] const PartitionStats& stats() const noexcept { return stats_; }
  [[nodiscard]] const Verifier& verifier() const noexcept { return verifier_; }
  // The highest logical round pushed so far.
  [[nodiscard]] uint64_t max_pushed() const noexcept { return max_pushed_; }
  // Logical round every worker starts the next run at.
  [[nodiscard]] uint64_t next_round() const noexcept { return next_round_; }

  // Start a run (ps: initialise the weights first, once). Only while idle.
  void start(const Knobs& knobs, uint64_t now_ns);
  // Open loop: stop sending new pushes (after completing the segment in progress) but keep digesting
  // results, to measure what comes back.
  void drain() noexcept;
  // Settle (see above); settled() turns true when done.
  void finish(uint64_t now_ns);

  // Pushes to transmit now (closed loop, init, retransmissions, repairs), at most out.size().
  [[nodiscard]] size_t poll(uint64_t now_ns, std::span<PushOrder> out);
  // Open loop: the next out.size() pushes of the lockstep schedule (running open loop only).
  [[nodiscard]] size_t open_pushes(uint64_t now_ns, std::span<PushOrder> out);

  Outcome on_result(uint16_t rank, uint32_t slot, uint32_t wire_round, std::span<const std::byte> payload,
                    uint64_t now_ns);
  // An error reply about (rank, slot, wire round); slot is -1 when it names no slot of this partition.
  void on_error(uint16_t rank, int64_t slot, uint32_t wire_round, proto::Status status, uint64_t now_ns);
  // One line of state for diagnostics (phase, init, each worker's round and what it still waits for).
  [[nodiscard]] std::string describe() const;
  // Closed loop with max_rounds: every worker has done its rounds.
  [[nodiscard]] bool rounds_done() const noexcept {
    return phase_ == Phase::running && knobs_.mode == LoopMode::closed && idle_workers_ == nworkers_;
  }

 private:
  struct Worker {
    uint64_t round = 0;
    uint32_t cursor = 0;       // next position of this round's order
    uint32_t inflight = 0;
    uint32_t remaining = 0;    // slots of `round` still without a result
    uint32_t retx_pos = kNone; // position of a retransmit pass, kNone when none runs
    uint64_t round_start_ns = 0;
    uint64_t last_progress_ns = 0;
    uint64_t rto_ns = 0;
    uint64_t rounds_done = 0;
    bool idle = false;
  };
  static constexpr uint32_t kNone = UINT32_MAX;

  [[nodiscard]] size_t idx(uint16_t rank, uint32_t slot) const noexcept { return size_t{rank} * nslots_ + slot; }
  [[nodiscard]] uint32_t order_at(uint16_t rank, uint32_t pos) const noexcept {
    return order_.empty() ? pos : order_[idx(rank, pos)];
  }
  [[nodiscard]] double rand01() noexcept;
  size_t emit(std::span<PushOrder> out, size_t n, uint16_t rank, uint32_t slot, uint64_t round, bool retransmit,
              uint64_t now_ns);
  size_t poll_init(uint64_t now_ns, std::span<PushOrder> out);
  size_t poll_closed(uint64_t now_ns, std::span<PushOrder> out);
  size_t poll_repair(uint64_t now_ns, std::span<PushOrder> out);
  void timers_closed(uint64_t now_ns);
  void begin_round(Worker& w, uint64_t round, uint64_t now_ns) noexcept;
  void round_done(Worker& w, uint64_t now_ns);
  void enter_running(uint64_t now_ns);
  void maybe_settled() noexcept;
  // A (rank, slot) got its answer for `logical`: a result, or (with_result false) a round_behind error that
  // says the result is lost for good. Returns false if it was answered already.
  bool answered(uint16_t rank, uint32_t slot, uint64_t logical, uint64_t now_ns, bool with_result);
  Outcome on_init_ack(uint32_t slot, std::span<const std::byte> payload, uint64_t now_ns);
  // ps: whether a rank-0 round-0 payload is the initial weights (an init answer arriving late). Only asked
  // after inits were resent; a server that returned the initial weights for round 0 would still never
  // complete the round, so nothing wrong is hidden.
  [[nodiscard]] bool stale_init_ack(uint32_t slot, std::span<const std::byte> payload);
  Outcome classify(Check c) noexcept;

  const Workload* wl_;
  SlotMap slots_;
  Verifier verifier_;
  uint32_t nslots_ = 0;
  uint16_t nworkers_ = 0;
  Knobs knobs_;
  Phase phase_ = Phase::idle;
  PartitionStats stats_;

  std::vector<uint64_t> acked_;    // [rank][slot]: logical round + 1 of the latest result (0: none)
  std::vector<uint64_t> sent_ns_;  // [rank][slot]: time of the latest transmission (0: never)
  std::vector<uint32_t> order_;    // [rank][pos] -> slot, with reorder
  std::vector<Worker> workers_;
  uint16_t rr_ = 0;
  uint16_t idle_workers_ = 0;
  uint64_t max_pushed_ = 0;
  uint64_t next_round_ = 0;
  uint64_t next_timer_ns_ = 0;
  uint64_t rng_ = 1;

  // ps initialisation (rank 0, once)
  bool initialized_ = false;
  std::vector<bool> init_acked_;
  uint32_t init_cursor_ = 0, init_pending_ = 0, init_inflight_ = 0;
  uint64_t init_progress_ns_ = 0, quiet_until_ns_ = 0;
  bool init_retransmitted_ = false;
  Phase after_init_ = Phase::running;

  // open loop
  uint64_t open_round_ = 0;
  uint32_t open_pos_ = 0;
  uint16_t open_rank_ = 0;
  // repair (open-loop settle)
  uint64_t goal_ = 0;              // settle: every (rank, slot) must reach acked == goal_
  uint64_t unsettled_ = 0;
  std::vector<size_t> repair_;     // (rank, slot) indexes to push again now
  size_t scan_pos_ = SIZE_MAX;
  uint64_t next_scan_ns_ = 0;
};

}  // namespace phub::gen

// One epoch of the stress run: a real Engine on a net_ring link with the epoch's jobs, the schedule run to
// the end, every transmit mbuf back, the counters checked, the engine stopped and destroyed.
#pragma once

#include <cstdint>
#include <string>

#include "shape.hpp"

namespace phub::stress {

struct EpochResult {
  uint64_t jobs = 0;
  uint64_t chunk_rounds = 0;      // rounds completed, summed over chunks
  uint64_t results_checked = 0;
  uint64_t elements_checked = 0;
  uint64_t results_reused_busy = 0;       // the engine's count: no spare result buffer was left
  uint64_t stale_copies_overwritten = 0;  // redundant copies read late that such a reuse overwrote
  std::string events;             // one line: what the schedule did and provoked
};

// Throws a Failure (with what went wrong, not yet the seed and shape) on any wrong answer.
[[nodiscard]] EpochResult run_epoch(uint64_t seed, uint64_t epoch, const EpochShape& shape);

}  // namespace phub::stress

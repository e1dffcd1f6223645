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
  uint64_t advances_deferred = 0;  // the engine's count: a round's advance waited for a free result buffer
  std::string events;             // one line: what the schedule did and provoked
};

// Throws a Failure (with what went wrong, not yet the seed and shape) on any wrong answer.
[[nodiscard]] EpochResult run_epoch(uint64_t seed, uint64_t epoch, const EpochShape& shape);

}  // namespace phub::stress

// Best-of-N timing of a target against its limit, interleaved round by round so both see the same machine.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>

namespace phub::agg::bench {

struct Race {
  double target_ns = std::numeric_limits<double>::infinity();  // best time per call
  double limit_ns = std::numeric_limits<double>::infinity();
};

template <class Fn>
double ns_per_call(Fn&& fn, size_t reps) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t r = 0; r < reps; ++r) fn();
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  return took.count() / static_cast<double>(reps);
}

// Calls per batch so that one batch of fn lasts about batch_ns.
template <class Fn>
size_t calibrate(Fn&& fn, double batch_ns) {
  size_t reps = 1;
  for (;;) {
    const double per_call = ns_per_call(fn, reps);
    if (per_call * static_cast<double>(reps) >= batch_ns / 4 || reps >= (size_t{1} << 24)) {
      return std::max<size_t>(1, static_cast<size_t>(batch_ns / std::max(per_call, 1.0)));
    }
    reps *= 2;
  }
}

// Each round times one batch of the target and one batch of every limit variant, alternating which goes first;
// the limit is the fastest variant. Best of `rounds` for each. Short batches in many rounds make it likely that
// both sides see the same quiet moments (and clock speeds) on a shared machine; a few unrecorded rounds first
// let the clock settle.
template <class Target, class... Limits>
Race race(int rounds, double batch_ns, Target&& target, Limits&&... limits) {
  const size_t reps = calibrate(target, batch_ns);
  constexpr int kWarmupRounds = 8;
  for (int round = 0; round < kWarmupRounds; ++round) {
    (void)ns_per_call(target, reps);
    ((void)ns_per_call(limits, reps), ...);
  }
  Race best;
  for (int round = 0; round < rounds; ++round) {
    auto run_limits = [&] { ((best.limit_ns = std::min(best.limit_ns, ns_per_call(limits, reps))), ...); };
    if (round % 2 == 0) run_limits();
    best.target_ns = std::min(best.target_ns, ns_per_call(target, reps));
    if (round % 2 != 0) run_limits();
  }
  return best;
}

}  // namespace phub::agg::bench

// When the DPDK agent's poller may nap: it busy-polls only in a window around the frame it expects next (a
// reply due after the best RTT so far, a request due one period after the last), so that a CPU shared with
// other work is not held for the whole wait, yet frames near the expected time are timed without nap delay.
#pragma once

#include <algorithm>
#include <cstdint>

namespace phub::probe {

// Times in one unit (TSC cycles in the agent).
struct PollWindow {
  uint64_t expected = 0;  // 0: nothing expected
  uint64_t early = 0;     // busy-poll from expected - early ...
  uint64_t late = 0;      // ... to expected + late

  // How long the poller may nap at `now`, at most `slice`: 0 inside the window, and never into it.
  [[nodiscard]] uint64_t nap(uint64_t now, uint64_t slice) const noexcept {
    if (expected == 0) return slice;
    if (now + early < expected) return std::min(slice, expected - early - now);
    return now <= expected + late ? 0 : slice;
  }
};

// Learns the period of incoming probe requests (a prober paces them) to predict the next one. A request found
// right after an empty poll was timed exactly; one found after a nap is given the time of the poll before the
// nap, the earliest it can have come, so a prediction errs early (more polling), never late (a missed window
// would find the next request after a nap again).
class ArrivalPredictor {
 public:
  // Periods outside [min_gap, max_gap] (bursts, pauses) are not predicted.
  ArrivalPredictor(uint64_t min_gap, uint64_t max_gap) : min_gap_(min_gap), max_gap_(max_gap) {}

  void observe(uint64_t t, bool exact) noexcept {
    const uint64_t gap = t > last_ ? t - last_ : 0;
    if (last_ == 0 || gap < min_gap_ || gap > max_gap_) {
      gap_ = 0;
    } else if (!exact || last_exact_ || gap_ == 0) {
      gap_ = gap;  // not from an earliest-time guess to an exact time: that gap comes out too long
    }
    last_ = t;
    last_exact_ = exact;
  }

  // From gap/8 (at least `margin`, the nap overshoot to allow for) before the next request to gap/4 after.
  [[nodiscard]] PollWindow window(uint64_t margin) const noexcept {
    if (gap_ == 0) return {};
    return {last_ + gap_, std::max(gap_ / 8, margin), gap_ / 4};
  }

 private:
  uint64_t min_gap_, max_gap_;
  uint64_t last_ = 0;
  uint64_t gap_ = 0;
  bool last_exact_ = false;
};

}  // namespace phub::probe

// A token bucket on the TSC clock: `rate` units a second (packets, bytes), a burst of 10 ms of the rate but at
// least `min_burst` units, full at the first use. One writer (its lcore). DPDK-free.
#pragma once

#include <algorithm>
#include <cstdint>

namespace phub::engine {

class TokenBucket {
 public:
  // True if `cost` units may pass now (and takes them); rate 0 is unlimited.
  bool admit(uint64_t now_tsc, uint64_t tsc_hz, uint64_t rate, double cost, double min_burst) noexcept {
    if (rate == 0) return true;
    const double burst = std::max(min_burst, static_cast<double>(rate) / 100.0);
    if (last_tsc_ == 0) {
      tokens_ = burst;
    } else if (now_tsc > last_tsc_) {
      tokens_ += static_cast<double>(now_tsc - last_tsc_) * static_cast<double>(rate) / static_cast<double>(tsc_hz);
    }
    tokens_ = std::min(tokens_, burst);
    last_tsc_ = std::max(last_tsc_, now_tsc);
    if (tokens_ < cost) return false;
    tokens_ -= cost;
    return true;
  }

 private:
  double tokens_ = 0;
  uint64_t last_tsc_ = 0;
};

}  // namespace phub::engine

// Retransmit timing: an RFC 6298-style estimate of a chunk's completion time, and exponential backoff.
#pragma once

#include <algorithm>
#include <cstdint>

namespace phub::client {

class Rto {
 public:
  Rto(uint32_t initial_us, uint32_t min_us, uint32_t max_us) noexcept
      : rto_ns_(uint64_t{initial_us} * 1000), min_ns_(uint64_t{min_us} * 1000), max_ns_(uint64_t{max_us} * 1000) {}

  // A completion time measured on a chunk that was sent once (Karn: never on retransmitted ones).
  void sample(uint64_t rtt_ns) noexcept {
    if (srtt_ns_ == 0) {
      srtt_ns_ = rtt_ns;
      rttvar_ns_ = rtt_ns / 2;
    } else {
      const uint64_t err = rtt_ns > srtt_ns_ ? rtt_ns - srtt_ns_ : srtt_ns_ - rtt_ns;
      rttvar_ns_ = (3 * rttvar_ns_ + err) / 4;
      srtt_ns_ = (7 * srtt_ns_ + rtt_ns) / 8;
    }
    rto_ns_ = std::clamp(srtt_ns_ + 4 * rttvar_ns_, min_ns_, max_ns_);
  }

  [[nodiscard]] uint64_t rto_ns() const noexcept { return rto_ns_; }
  [[nodiscard]] uint64_t srtt_ns() const noexcept { return srtt_ns_; }
  // Wait before retransmit number `attempt` + 1 (attempt 0: the first timeout): rto * 2^attempt, capped.
  [[nodiscard]] uint64_t backoff_ns(uint32_t attempt) const noexcept {
    uint64_t t = rto_ns_;
    for (uint32_t i = 0; i < attempt && t < max_ns_; ++i) t *= 2;
    return std::min(t, max_ns_);
  }

 private:
  uint64_t rto_ns_;
  uint64_t min_ns_;
  uint64_t max_ns_;
  uint64_t srtt_ns_ = 0;
  uint64_t rttvar_ns_ = 0;
};

}  // namespace phub::client

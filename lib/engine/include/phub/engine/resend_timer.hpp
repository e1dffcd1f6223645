// The resend timer of a rack hub's forwards towards one peer hub (docs/hierarchy.md, "A rack hub towards
// the home: a reliable worker"): the RFC 6298 estimator of the time between a partial and the fwd_result
// that answers it. Pure (no DPDK, no allocation): times are in whatever unit the caller uses (the lcore: TSC
// ticks), the same for the limits and the samples.
#pragma once

#include <algorithm>
#include <cstdint>

namespace phub::engine {

class ResendTimer {
 public:
  struct Limits {
    uint64_t initial = 0;  // the RTO before the first sample
    uint64_t min = 0;      // the least RTO, and the least margin over the smoothed round trip
    uint64_t max = 0;      // the largest RTO, backoff included
  };

  explicit ResendTimer(Limits limits) noexcept : limits_(limits), rto_(std::clamp(limits.initial, limits.min, limits.max)) {}

  // A round trip measured from a partial that was sent once (Karn's rule: never from a resent one): updates
  // SRTT and RTTVAR (gains 1/8 and 1/4) and sets the RTO from them, which ends any backoff.
  void sample(uint64_t rtt) noexcept {
    if (srtt_ == 0) {
      srtt_ = std::max<uint64_t>(rtt, 1);
      rttvar_ = rtt / 2;
    } else {
      const uint64_t err = srtt_ > rtt ? srtt_ - rtt : rtt - srtt_;
      rttvar_ = (3 * rttvar_ + err) / 4;
      srtt_ = std::max<uint64_t>((7 * srtt_ + rtt) / 8, 1);
    }
    // The margin over SRTT is 4*RTTVAR, but at least min and a quarter of SRTT: on a steady path RTTVAR
    // decays towards 0, and SRTT plus 1 ms would take any jitter of a few ms (a descheduled lcore, a
    // queue) for a loss. A quarter costs a real loss a quarter of a round trip more.
    rto_ = std::clamp(srtt_ + std::max({limits_.min, 4 * rttvar_, srtt_ / 4}), limits_.min, limits_.max);
    ++samples_;
  }

  // A wait of `waited` ended without an answer: the next wait is twice as long (up to max), and so is the
  // RTO until the next sample. Several waits that began at the same RTO and time out together double it once.
  // `samples_at_start` is samples() when the wait began: if the peer has answered other waits since (fresh
  // samples), this wait's timeout is its own (a lost partial or result, or a home still waiting for another
  // rack), not a silent peer. Its own next wait still doubles, but the RTO keeps the fresh estimate that new
  // waits start from: a long wait begun at a backed-off RTO must not pin every later wait at it (seen: RTO
  // 2 s with a 15 ms round trip, so each later loss cost 2-4 s and workers' operations timed out).
  [[nodiscard]] uint64_t timed_out(uint64_t waited, uint64_t samples_at_start) noexcept {
    const uint64_t next = backed_off(waited);
    if (samples_at_start == samples_) rto_ = std::max(rto_, next);
    return next;
  }
  // Samples taken so far (a wait notes it when it begins).
  [[nodiscard]] uint64_t samples() const noexcept { return samples_; }

  [[nodiscard]] uint64_t backed_off(uint64_t waited) const noexcept {
    return waited >= limits_.max / 2 ? limits_.max : std::max(2 * waited, limits_.min);
  }
  [[nodiscard]] uint64_t rto() const noexcept { return rto_; }
  [[nodiscard]] uint64_t srtt() const noexcept { return srtt_; }  // 0: no sample yet
  [[nodiscard]] uint64_t rttvar() const noexcept { return rttvar_; }

 private:
  Limits limits_;
  uint64_t srtt_ = 0;
  uint64_t rttvar_ = 0;
  uint64_t rto_;
  uint64_t samples_ = 0;
};

}  // namespace phub::engine

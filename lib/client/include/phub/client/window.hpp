// The send window, in bytes of results awaited. Delay-based, in the manner of TCP Vegas and FAST: once per
// window of results it compares the round trip of that window (its fastest answer) with the path's base
// round trip, and steers the window towards the size that keeps `delay_target` of data queued: grow by at
// most one chunk, shrink halfway to the target. So the window stops at the bottleneck's rate instead of
// filling the shaper's queue, whose delay every allreduce would pay at its end. Losses still cut it to 70 %
// (at most once per window of sends, never below the floor), undone when the loss proves to be reordering.
// Bytes, not packets, so that the window means the same queue at every MTU.
#pragma once

#include <algorithm>
#include <cstdint>

namespace phub::client {

class Window {
 public:
  // max_bytes: the cap; min_bytes: the floor (at most the cap); initial_bytes: the first window.
  Window(uint64_t max_bytes, uint64_t min_bytes, uint64_t initial_bytes) noexcept { reset(max_bytes, min_bytes, initial_bytes); }

  void reset(uint64_t max_bytes, uint64_t min_bytes, uint64_t initial_bytes) noexcept {
    max_ = std::max<uint64_t>(max_bytes, 1);
    min_ = std::min(min_bytes, max_);
    cwnd_ = std::clamp(initial_bytes, min_, max_);
    ssthresh_ = max_;
  }
  // Growth step of the additive increase (one chunk).
  void set_step(uint64_t bytes) noexcept { step_ = std::max<uint64_t>(bytes, 1); }
  // Queueing delay the window aims at; 0: loss-based only (one step more per window of results).
  void set_delay_target(uint64_t ns) noexcept { d_.target_ns = ns; }

  // A new chunk of `bytes` may start: it fits, or nothing is in flight (a chunk is never split).
  [[nodiscard]] bool may_send(uint64_t bytes) const noexcept { return in_flight_ == 0 || in_flight_ + bytes <= cwnd_; }
  void on_send(uint64_t bytes) noexcept {
    in_flight_ += bytes;
    sent_total_ += bytes;
  }
  // `bytes` of results arrived at `now_ns`; `rtt_ns` is how long they took (0: unknown, e.g. sent twice).
  void on_result(uint64_t bytes, uint64_t rtt_ns, uint64_t now_ns) noexcept {
    in_flight_ -= std::min(in_flight_, bytes);
    if (rtt_ns != 0) sample(rtt_ns, now_ns);
    if (cwnd_ < ssthresh_) {
      // Slow start, until the queue reaches half the target.
      if (d_.target_ns != 0 && rtt_ns != 0 && rtt_ns > base_ns() + d_.target_ns / 2) {
        ssthresh_ = cwnd_;
      } else {
        cwnd_ = std::min(max_, cwnd_ + bytes);
      }
    }
    acked_ += bytes;
    if (acked_ < cwnd_) return;
    acked_ = 0;
    end_epoch();
  }
  // Results that will not come (a request abandoned).
  void on_abandon(uint64_t bytes) noexcept { in_flight_ -= std::min(in_flight_, bytes); }
  // A loss of something sent at send mark `sent_mark`. Only losses of what was sent after the last
  // decrease shrink the window again.
  void on_loss(uint64_t sent_mark) noexcept {
    if (sent_mark < recovery_mark_) return;
    undo_cwnd_ = cwnd_;
    undo_ssthresh_ = ssthresh_;
    ssthresh_ = std::max(min_, cwnd_ * kDecreasePercent / 100);
    cwnd_ = ssthresh_;
    acked_ = 0;
    recovery_mark_ = sent_total_;
  }
  // The last decrease answered a loss that was not one (the packet was only late): take it back.
  void undo() noexcept {
    cwnd_ = std::max(cwnd_, undo_cwnd_);
    ssthresh_ = std::max(ssthresh_, undo_ssthresh_);
    undo_cwnd_ = 0;
    undo_ssthresh_ = 0;
  }

  [[nodiscard]] uint64_t cwnd() const noexcept { return cwnd_; }
  [[nodiscard]] uint64_t in_flight() const noexcept { return in_flight_; }
  // A mark that orders sends against decreases (bytes sent so far).
  [[nodiscard]] uint64_t send_mark() const noexcept { return sent_total_; }
  // The path's base round trip: the fastest answer of the last one to two base periods (0: none yet).
  [[nodiscard]] uint64_t base_ns() const noexcept {
    const uint64_t b = std::min(d_.base_now_ns, d_.base_prev_ns);
    return b == UINT64_MAX ? 0 : b;
  }

  static constexpr uint64_t kDecreasePercent = 70;
  static constexpr uint64_t kBasePeriodNs = 10'000'000'000;  // the base forgets a faster past after 10-20 s

 private:
  void sample(uint64_t rtt_ns, uint64_t now_ns) noexcept {
    d_.epoch_min_ns = std::min(d_.epoch_min_ns, rtt_ns);
    if (now_ns >= d_.period_start_ns + kBasePeriodNs) {
      d_.base_prev_ns = d_.base_now_ns;
      d_.base_now_ns = UINT64_MAX;
      d_.period_start_ns = now_ns;
    }
    d_.base_now_ns = std::min(d_.base_now_ns, rtt_ns);
  }

  // A window of results arrived: adjust the window once.
  void end_epoch() noexcept {
    const uint64_t rtt = d_.epoch_min_ns;
    d_.epoch_min_ns = UINT64_MAX;
    if (d_.target_ns == 0 || rtt == UINT64_MAX) {
      if (cwnd_ >= ssthresh_) cwnd_ = std::min(max_, cwnd_ + step_);
      return;
    }
    // The window that would queue target_ns at the rate of the last window: cwnd * (base + target) / rtt.
    const uint64_t base = base_ns();
    const double want = static_cast<double>(cwnd_) * static_cast<double>(base + d_.target_ns) / static_cast<double>(rtt);
    const auto want_bytes = static_cast<uint64_t>(want);
    if (want_bytes < cwnd_) {
      cwnd_ = std::max(min_, (cwnd_ + want_bytes) / 2);
      ssthresh_ = std::min(ssthresh_, cwnd_);
    } else if (cwnd_ >= ssthresh_) {
      cwnd_ = std::min({max_, cwnd_ + step_, want_bytes});
      cwnd_ = std::max(cwnd_, min_);
    }
  }

  struct Delay {
    uint64_t target_ns = 0;
    uint64_t epoch_min_ns = UINT64_MAX;  // fastest sample of the current window of results
    uint64_t base_now_ns = UINT64_MAX;   // fastest sample of this base period ...
    uint64_t base_prev_ns = UINT64_MAX;  // ... and of the previous one
    uint64_t period_start_ns = 0;
  };

  uint64_t max_ = 1, min_ = 1;
  uint64_t cwnd_ = 1, ssthresh_ = 1, step_ = 1;
  uint64_t acked_ = 0, in_flight_ = 0;  // bytes answered in this window of results; bytes awaited
  uint64_t sent_total_ = 0, recovery_mark_ = 0;
  uint64_t undo_cwnd_ = 0, undo_ssthresh_ = 0;
  Delay d_;
};

}  // namespace phub::client

// The send window: how many packets may await their result at once. Slow start, then an additive
// increase of one chunk per window of results; cut to 70 % on a loss (a retransmit timeout or a gap in the
// results), at most once per window of sends, never below two chunks. A parameter server's bottleneck is
// usually its receive ring, shared by every worker: the window must come back quickly after a cut.
#pragma once

#include <algorithm>
#include <cstdint>

namespace phub::client {

class Window {
 public:
  Window(uint32_t max_packets, uint32_t min_packets) noexcept
      : max_(std::max(max_packets, min_packets)), min_(min_packets), cwnd_(std::min(max_, kInitial)),
        ssthresh_(max_) {}

  // A new chunk of `packets` may start: it fits, or nothing is in flight (a chunk is never split).
  [[nodiscard]] bool may_send(uint32_t packets) const noexcept {
    return in_flight_ == 0 || in_flight_ + packets <= cwnd_;
  }
  void on_send(uint32_t packets) noexcept {
    in_flight_ += packets;
    sent_total_ += packets;
  }
  // One result arrived (or an expected result was abandoned with grow = false).
  void on_result(bool grow = true) noexcept {
    if (in_flight_ > 0) --in_flight_;
    if (!grow) return;
    if (cwnd_ < ssthresh_) {
      cwnd_ = std::min(max_, cwnd_ + 1);
    } else if (++acked_ >= cwnd_) {
      acked_ = 0;
      cwnd_ = std::min(max_, cwnd_ + increase_);
    }
  }
  void on_abandon(uint32_t packets) noexcept { in_flight_ -= std::min(in_flight_, packets); }
  // A retransmit timer of something sent at send mark `sent_mark` expired. Only losses of packets sent
  // after the last decrease shrink the window again.
  void on_timeout(uint64_t sent_mark) noexcept {
    if (sent_mark < recovery_mark_) return;
    ssthresh_ = std::max(min_, cwnd_ * kDecreasePercent / 100);
    cwnd_ = ssthresh_;
    acked_ = 0;
    recovery_mark_ = sent_total_;
  }

  // Sizes the steps by the job's chunks: the floor becomes two chunks (at most the maximum), the
  // additive increase one chunk.
  void set_chunk_packets(uint32_t packets) noexcept {
    min_ = std::min(max_, std::max(min_, 2 * packets));
    increase_ = std::max<uint32_t>(1, packets);
    cwnd_ = std::max(cwnd_, min_);
    ssthresh_ = std::max(ssthresh_, min_);
  }

  [[nodiscard]] uint32_t cwnd() const noexcept { return cwnd_; }
  [[nodiscard]] uint32_t in_flight() const noexcept { return in_flight_; }
  // A mark that orders sends against decreases (packets sent so far).
  [[nodiscard]] uint64_t send_mark() const noexcept { return sent_total_; }

  static constexpr uint32_t kInitial = 64;
  static constexpr uint32_t kDecreasePercent = 70;

 private:
  uint32_t max_;
  uint32_t min_;
  uint32_t cwnd_;
  uint32_t ssthresh_;
  uint32_t increase_ = 1;
  uint32_t acked_ = 0;
  uint32_t in_flight_ = 0;
  uint64_t sent_total_ = 0;
  uint64_t recovery_mark_ = 0;
};

}  // namespace phub::client

// The chunks in flight towards each server lcore (a lane), in transmission order, with the lane's loss
// recovery state. A server lcore handles each worker's packets in order and completes a segment when the
// last worker's push arrives; every worker sends chunks in the same order. So a lane's results come back
// in transmission order, and a result for something sent later than a missing segment means that a push
// or a result was lost (as TCP's RACK reasons), whatever the other workers' pace. Paths do reorder a
// little (a qdisc run from either CPU feeds either CPU's backlog), so "later" is also measured in time.
#pragma once

#include <cstdint>
#include <vector>

namespace phub::client {

class Lanes {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Lane {
    uint32_t head = kNone;
    uint32_t tail = kNone;
    uint32_t count = 0;
    uint64_t timer_ns = 0;        // expiry: no result on the lane since the last one for this long
    uint32_t expiries = 0;        // timer expiries since the lane's last result
    uint64_t delivered_mark = 0;  // highest packet mark answered among packets sent once, plus one
    uint64_t delivered_rtt_ns = 0;  // the time that packet took to be answered
    uint64_t reorder_wake_ns = 0;   // when an older missing segment stops being possibly reordered (0: none)
  };

  void resize(uint32_t lanes, uint32_t chunks) {
    lanes_.assign(lanes, Lane{});
    prev_.assign(chunks, kNone);
    next_.assign(chunks, kNone);
    lane_of_.assign(chunks, kNone);
  }

  [[nodiscard]] uint32_t size() const noexcept { return static_cast<uint32_t>(lanes_.size()); }
  [[nodiscard]] Lane& lane(uint32_t i) noexcept { return lanes_[i]; }
  [[nodiscard]] const Lane& lane(uint32_t i) const noexcept { return lanes_[i]; }
  [[nodiscard]] bool linked(uint32_t chunk) const noexcept { return lane_of_[chunk] != kNone; }
  [[nodiscard]] uint32_t next(uint32_t chunk) const noexcept { return next_[chunk]; }

  // Appends a chunk that is in no lane (it was just transmitted).
  void push_back(uint32_t lane_index, uint32_t chunk) noexcept {
    Lane& l = lanes_[lane_index];
    lane_of_[chunk] = lane_index;
    prev_[chunk] = l.tail;
    next_[chunk] = kNone;
    if (l.tail != kNone) {
      next_[l.tail] = chunk;
    } else {
      l.head = chunk;
    }
    l.tail = chunk;
    ++l.count;
  }

  void remove(uint32_t chunk) noexcept {
    Lane& l = lanes_[lane_of_[chunk]];
    const uint32_t p = prev_[chunk];
    const uint32_t n = next_[chunk];
    (p != kNone ? next_[p] : l.head) = n;
    (n != kNone ? prev_[n] : l.tail) = p;
    lane_of_[chunk] = kNone;
    --l.count;
  }

  // Moves a linked chunk to the end of its lane (it was transmitted again).
  void move_to_back(uint32_t chunk) noexcept {
    const uint32_t l = lane_of_[chunk];
    remove(chunk);
    push_back(l, chunk);
  }

 private:
  std::vector<Lane> lanes_;
  std::vector<uint32_t> prev_;
  std::vector<uint32_t> next_;
  std::vector<uint32_t> lane_of_;
};

}  // namespace phub::client

// Which result segments of the chunks' current operations have arrived (deduplication).
#pragma once

#include <cstdint>
#include <vector>

namespace phub::client {

class SegmentTracker {
 public:
  void resize(uint64_t segments) {
    have_.assign((segments + 63) / 64, 0);
  }
  // Records segment s; false if it was already there (a duplicate).
  bool mark(uint64_t s) noexcept {
    uint64_t& w = have_[s / 64];
    const uint64_t bit = uint64_t{1} << (s % 64);
    if ((w & bit) != 0) return false;
    w |= bit;
    return true;
  }
  [[nodiscard]] bool has(uint64_t s) const noexcept { return ((have_[s / 64] >> (s % 64)) & 1u) != 0; }
  void clear(uint64_t first, uint64_t count) noexcept {
    for (uint64_t s = first; s < first + count; ++s) have_[s / 64] &= ~(uint64_t{1} << (s % 64));
  }

 private:
  std::vector<uint64_t> have_;
};

}  // namespace phub::client

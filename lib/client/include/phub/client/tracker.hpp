// Which result segments have arrived (deduplication), and how many stray answers of an earlier
// non-advancing request (ps init or pull) may still arrive for a segment with the same round number.
#pragma once

#include <cstdint>
#include <vector>

namespace phub::client {

class SegmentTracker {
 public:
  void resize(uint64_t segments) {
    have_.assign((segments + 63) / 64, 0);
    stale_.assign(segments, 0);
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

  // One more answer to a repeated request may come for segment s.
  void add_stale(uint64_t s) noexcept {
    if (stale_[s] < UINT8_MAX) ++stale_[s];
  }
  // An answer for s arrived that could be such a stray one: consume one credit; false if none is left.
  bool take_stale(uint64_t s) noexcept {
    if (stale_[s] == 0) return false;
    --stale_[s];
    return true;
  }
  void clear_stale(uint64_t first, uint64_t count) noexcept {
    for (uint64_t s = first; s < first + count; ++s) stale_[s] = 0;
  }

 private:
  std::vector<uint64_t> have_;
  std::vector<uint8_t> stale_;
};

}  // namespace phub::client

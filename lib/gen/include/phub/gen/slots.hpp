// The segments ("slots") a generator partition drives: every segment of every chunk owned by a set of
// server lcores, in chunk order, with a lookup from (chunk, element offset) back to the slot.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "phub/gen/workload.hpp"

namespace phub::gen {

struct Slot {
  uint32_t chunk = 0;
  uint32_t seg = 0;
  uint32_t elem_offset = 0;  // first element, counted from the start of the chunk
  uint16_t elems = 0;
  uint16_t owner = 0;        // server lcore index: UDP port port_base + owner, and the TX queue on memif
};

class SlotMap {
 public:
  SlotMap() = default;
  // Slots of the chunks owned by any of `owners` (every chunk when `owners` is empty).
  SlotMap(const Workload& wl, std::span<const uint16_t> owners);

  [[nodiscard]] std::span<const Slot> slots() const noexcept { return slots_; }
  [[nodiscard]] uint32_t size() const noexcept { return static_cast<uint32_t>(slots_.size()); }
  [[nodiscard]] const Slot& operator[](uint32_t i) const noexcept { return slots_[i]; }
  // Slot of a segment, or -1 when the chunk is not in the map or the offset names no segment.
  [[nodiscard]] int64_t find(uint32_t chunk, uint32_t elem_offset) const noexcept;
  // Elements over all slots.
  [[nodiscard]] uint64_t elems() const noexcept { return elems_; }

 private:
  std::vector<Slot> slots_;
  std::vector<int64_t> first_slot_;  // per chunk id: index of its segment 0, or -1
  uint32_t seg_elems_ = 1;
  uint64_t elems_ = 0;
};

}  // namespace phub::gen

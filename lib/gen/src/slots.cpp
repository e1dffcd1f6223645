// Building a partition's slot list from the job's chunk map.
#include "phub/gen/slots.hpp"

#include <algorithm>

namespace phub::gen {

SlotMap::SlotMap(const Workload& wl, std::span<const uint16_t> owners) : seg_elems_(wl.segment_elems()) {
  const auto& layout = wl.layout();
  first_slot_.assign(layout.chunk_count(), -1);
  for (uint32_t id = 0; id < layout.chunk_count(); ++id) {
    const proto::ChunkInfo& c = layout.chunk(id);
    if (!owners.empty() && std::find(owners.begin(), owners.end(), c.owner) == owners.end()) continue;
    first_slot_[id] = static_cast<int64_t>(slots_.size());
    for (uint32_t s = 0; s < c.segments; ++s) {
      Slot slot;
      slot.chunk = id;
      slot.seg = s;
      slot.elem_offset = layout.segment_offset(s);
      slot.elems = static_cast<uint16_t>(layout.segment_count_elems(c, s));
      slot.owner = c.owner;
      elems_ += slot.elems;
      slots_.push_back(slot);
    }
  }
}

int64_t SlotMap::find(uint32_t chunk, uint32_t elem_offset) const noexcept {
  if (chunk >= first_slot_.size() || first_slot_[chunk] < 0 || elem_offset % seg_elems_ != 0) return -1;
  const int64_t slot = first_slot_[chunk] + elem_offset / seg_elems_;
  if (slot >= static_cast<int64_t>(slots_.size()) || slots_[slot].chunk != chunk) return -1;
  return slot;
}

}  // namespace phub::gen

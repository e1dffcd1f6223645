// The home map of a hierarchical job: which hub (rack index) completes each chunk's rounds for the whole
// job. Every hub computes it from the same layout and rack count, so it is part of the protocol (no DPDK).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/proto/layout.hpp"

namespace phub::proto {

class HomeMap {
 public:
  // Homes spread over `hubs` by bytes within each owner lcore of `layout`: that lcore's chunks, largest
  // first (ties by chunk id), each to the hub with the fewest elements homed on that lcore so far, the
  // lowest hub on ties. Deterministic for equal inputs. Refuses 0 hubs.
  [[nodiscard]] static Expected<HomeMap, std::string> build(const Layout& layout, uint16_t hubs);

  [[nodiscard]] uint16_t hubs() const noexcept { return hubs_; }
  [[nodiscard]] uint16_t home(uint32_t chunk_id) const noexcept { return home_[chunk_id]; }
  // Chunk ids homed at `hub`, in increasing order.
  [[nodiscard]] std::span<const uint32_t> homed(uint16_t hub) const noexcept { return homed_[hub]; }
  // Elements homed at `hub` in total, and on one owner lcore of the layout.
  [[nodiscard]] uint64_t hub_elems(uint16_t hub) const noexcept { return hub_elems_[hub]; }
  [[nodiscard]] uint64_t hub_owner_elems(uint16_t hub, uint16_t owner) const noexcept {
    return hub_owner_elems_[static_cast<size_t>(owner) * hubs_ + hub];
  }

 private:
  uint16_t hubs_ = 0;
  std::vector<uint16_t> home_;
  std::vector<std::vector<uint32_t>> homed_;
  std::vector<uint64_t> hub_elems_;
  std::vector<uint64_t> hub_owner_elems_;  // [owner * hubs + hub]
};

}  // namespace phub::proto

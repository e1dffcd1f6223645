// phub rack grouping: which hosts report to which rack hub, and which host should run each hub.
#pragma once

#include <span>
#include <vector>

#include "phub/topo/square.hpp"

namespace phub::topo {

struct RackPlan {
  std::vector<std::vector<size_t>> members;  // per rack, hosts in rank (ring) order
  std::vector<size_t> hub;                   // per rack, the host that should run its hub
};

// One rack per locality group, in ring order. The hub is the host minimising its total weight to its
// own members plus to the other racks' hubs (medoids first, then one refinement pass).
[[nodiscard]] RackPlan plan_racks(const Square& w, std::span<const int> group, std::span<const size_t> ring_order);

}  // namespace phub::topo

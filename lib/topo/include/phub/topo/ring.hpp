// Ring order planning: groups contiguous, group order and member order minimising the ring's total weight.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "phub/topo/square.hpp"

namespace phub::topo {

struct RingPlan {
  std::vector<size_t> order;  // host indices in rank order
  double weight = 0.0;        // sum of w over the ring's n edges (including the closing one)
  bool exact = false;         // proven optimal among group-contiguous rings
};

// The documented quality bound of ring_heuristic against ring_exact (checked by the unit tests).
inline constexpr double kRingHeuristicBound = 1.05;

// Weight of the closed ring (w must be symmetric).
[[nodiscard]] double ring_weight(const Square& w, std::span<const size_t> order);

// True if every group occupies one contiguous arc of the (cyclic) order.
[[nodiscard]] bool groups_contiguous(std::span<const int> group, std::span<const size_t> order);

// Whether ring_exact fits its work budget for these groups (a few hundred ms at most).
[[nodiscard]] bool ring_exact_feasible(std::span<const int> group);

// Exact optimum among group-contiguous rings: Held-Karp for the best path between every entry and exit
// of each group, then a dynamic program over sets of groups with the exit host as state.
[[nodiscard]] RingPlan ring_exact(const Square& w, std::span<const int> group);

struct RingHeuristicOptions {
  size_t exact_group_max = 10;      // groups up to this size get exact (Held-Karp) entry-to-exit paths
  size_t enumerate_groups_max = 7;  // every group order is tried up to this many groups
  size_t boundary_hosts = 8;        // entry/exit candidates of groups above 64 hosts
};

// Heuristic for large N. Per group, a table of best paths between every entry and exit (exact for small
// groups, nearest neighbour + 2-opt for big ones). Group order: all orders for few groups, else nearest
// neighbour + 2-opt over the group sequence; each order is scored by an exact DP over entries and exits.
// The result is polished by 2-opt/Or-opt moves that keep groups contiguous. Within kRingHeuristicBound
// of ring_exact on the tested instances, also with every approximation forced on.
[[nodiscard]] RingPlan ring_heuristic(const Square& w, std::span<const int> group,
                                      const RingHeuristicOptions& opts = {});

// ring_exact when feasible, else ring_heuristic.
[[nodiscard]] RingPlan plan_ring(const Square& w, std::span<const int> group);

// Members of each group (groups numbered 0..k-1), in index order.
[[nodiscard]] std::vector<std::vector<size_t>> members_by_group(std::span<const int> group);

}  // namespace phub::topo

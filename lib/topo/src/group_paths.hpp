// Best paths through one group between every candidate entry and exit host (exact or heuristic).
#pragma once

#include <cstddef>
#include <vector>

#include "phub/topo/square.hpp"

namespace phub::topo::detail {

struct GroupPaths {
  std::vector<size_t> members;
  std::vector<double> cost;               // [e * s + x]; infinite where (e, x) is not a candidate
  std::vector<std::vector<size_t>> path;  // [e * s + x]: hosts from members[e] to members[x]
  [[nodiscard]] size_t size() const { return members.size(); }
};

// Exact (Held-Karp) when the group has at most exact_max hosts; else nearest-neighbour chains with 2-opt
// between fixed endpoints. Groups above 64 hosts only consider the `boundary` hosts nearest to the rest
// of the job as entries and exits.
[[nodiscard]] GroupPaths group_paths(const Square& w, const std::vector<size_t>& members, size_t exact_max,
                                     size_t boundary);

}  // namespace phub::topo::detail

// Ring helpers shared by the exact and heuristic planners, and the planner choice.
#include <algorithm>

#include "phub/topo/ring.hpp"

namespace phub::topo {

double ring_weight(const Square& w, std::span<const size_t> order) {
  double total = 0.0;
  for (size_t r = 0; r < order.size() && order.size() > 1; ++r) total += w.at(order[r], order[(r + 1) % order.size()]);
  return total;
}

bool groups_contiguous(std::span<const int> group, std::span<const size_t> order) {
  // Contiguous iff the number of group changes around the ring equals the number of distinct groups (or 0).
  size_t changes = 0;
  std::vector<int> seen;
  for (size_t r = 0; r < order.size(); ++r) {
    const int g = group[order[r]];
    if (std::find(seen.begin(), seen.end(), g) == seen.end()) seen.push_back(g);
    changes += g != group[order[(r + 1) % order.size()]] ? 1 : 0;
  }
  return seen.size() <= 1 ? changes == 0 : changes == seen.size();
}

std::vector<std::vector<size_t>> members_by_group(std::span<const int> group) {
  std::vector<std::vector<size_t>> out;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] < 0) continue;
    if (static_cast<size_t>(group[i]) >= out.size()) out.resize(static_cast<size_t>(group[i]) + 1);
    out[static_cast<size_t>(group[i])].push_back(i);
  }
  return out;
}

RingPlan plan_ring(const Square& w, std::span<const int> group) {
  return ring_exact_feasible(group) ? ring_exact(w, group) : ring_heuristic(w, group);
}

}  // namespace phub::topo

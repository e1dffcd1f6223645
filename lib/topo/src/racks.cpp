// Rack grouping for phub's hierarchy and hub placement.
#include "phub/topo/racks.hpp"

#include <algorithm>
#include <limits>

namespace phub::topo {
namespace {

size_t best_hub(const Square& w, const std::vector<size_t>& members, const std::vector<size_t>& other_hubs) {
  size_t best = members.front();
  double best_cost = std::numeric_limits<double>::infinity();
  for (size_t h : members) {
    double cost = 0.0;
    for (size_t m : members) cost += w.at(h, m);
    for (size_t o : other_hubs) cost += w.at(h, o);
    if (cost < best_cost) best_cost = cost, best = h;
  }
  return best;
}

}  // namespace

RackPlan plan_racks(const Square& w, std::span<const int> group, std::span<const size_t> ring_order) {
  RackPlan plan;
  std::vector<int> rack_of_group;
  for (size_t host : ring_order) {
    const auto g = static_cast<size_t>(group[host]);
    if (g >= rack_of_group.size()) rack_of_group.resize(g + 1, -1);
    if (rack_of_group[g] < 0) rack_of_group[g] = static_cast<int>(plan.members.size()), plan.members.emplace_back();
    plan.members[static_cast<size_t>(rack_of_group[g])].push_back(host);
  }
  for (const auto& m : plan.members) plan.hub.push_back(best_hub(w, m, {}));
  for (size_t r = 0; r < plan.members.size(); ++r) {
    std::vector<size_t> others;
    for (size_t o = 0; o < plan.hub.size(); ++o)
      if (o != r) others.push_back(plan.hub[o]);
    plan.hub[r] = best_hub(w, plan.members[r], others);
  }
  return plan;
}

}  // namespace phub::topo

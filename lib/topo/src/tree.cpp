// Tree plan: group blocks with leaders first, group order chosen by the binomial-tree cost model.
#include "phub/topo/tree.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace phub::topo {

std::vector<long> binomial_parents(size_t n) {
  std::vector<long> parent(n, -1);
  for (size_t r = 1; r < n; ++r) parent[r] = static_cast<long>(r & (r - 1));
  return parent;
}

TreePlan plan_tree(const LinkModel& lm, const Square& w, std::span<const size_t> ring_order, double bytes) {
  // Blocks: each group's members in ring order, rotated so the leader comes first.
  std::vector<std::vector<size_t>> blocks;
  std::vector<int> block_of_group;
  for (size_t host : ring_order) {
    const auto g = static_cast<size_t>(lm.group[host]);
    if (g >= block_of_group.size()) block_of_group.resize(g + 1, -1);
    if (block_of_group[g] < 0) block_of_group[g] = static_cast<int>(blocks.size()), blocks.emplace_back();
    blocks[static_cast<size_t>(block_of_group[g])].push_back(host);
  }
  for (auto& b : blocks) {
    auto total = [&](size_t h) { double t = 0; for (size_t m : b) t += w.at(h, m); return t; };
    const auto leader = std::min_element(b.begin(), b.end(), [&](size_t x, size_t y) { return total(x) < total(y); });
    std::rotate(b.begin(), leader, b.end());
  }
  std::vector<size_t> perm(blocks.size());
  std::iota(perm.begin(), perm.end(), size_t{0});
  if (blocks.size() > 7)
    std::stable_sort(perm.begin(), perm.end(), [&](size_t x, size_t y) { return blocks[x].size() > blocks[y].size(); });
  TreePlan best{{}, binomial_parents(ring_order.size())};
  double best_s = std::numeric_limits<double>::infinity();
  do {
    std::vector<size_t> order;
    for (size_t b : perm) order.insert(order.end(), blocks[b].begin(), blocks[b].end());
    const double t = tree_allreduce_s(lm, order, bytes);
    if (t < best_s) best_s = t, best.order = std::move(order);
  } while (blocks.size() <= 7 && std::next_permutation(perm.begin(), perm.end()));
  return best;
}

}  // namespace phub::topo

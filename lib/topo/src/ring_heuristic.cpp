// Heuristic group-contiguous ring for large N: group order search over entry/exit-optimal tours, then polish.
#include <algorithm>
#include <numeric>

#include "group_paths.hpp"
#include "held_karp.hpp"
#include "phub/topo/ring.hpp"
#include "ring_improve.hpp"

namespace phub::topo {
namespace {

using detail::GroupPaths;
using detail::kInf;

// Cheapest ring visiting the groups in cyclic order `seq`, choosing every group's entry and exit: a
// shortest-path DP with the exit host as state (exact for this order and these path tables).
double tour(const Square& w, const std::vector<GroupPaths>& gp, const std::vector<size_t>& seq,
            std::vector<size_t>* order) {
  const GroupPaths& first = gp[seq[0]];
  const size_t k = seq.size();
  std::vector<std::vector<size_t>> via_exit(k), via_entry(k);
  std::vector<double> cur, next, into;
  double best = kInf;
  for (size_t e0 = 0; e0 < first.size(); ++e0) {
    cur.assign(first.size(), kInf);
    for (size_t x = 0; x < first.size(); ++x) cur[x] = first.cost[e0 * first.size() + x];
    for (size_t t = 1; t < k; ++t) {
      const GroupPaths &prev = gp[seq[t - 1]], &g = gp[seq[t]];
      const size_t s = g.size();
      into.assign(s, kInf), next.assign(s, kInf);
      via_exit[t].assign(s, 0), via_entry[t].assign(s, 0);
      for (size_t e = 0; e < s; ++e)
        for (size_t x = 0; x < prev.size(); ++x)
          if (const double c = cur[x] + w.at(prev.members[x], g.members[e]); c < into[e]) into[e] = c, via_exit[t][e] = x;
      for (size_t y = 0; y < s; ++y)
        for (size_t e = 0; e < s; ++e)
          if (const double c = into[e] + g.cost[e * s + y]; c < next[y]) next[y] = c, via_entry[t][y] = e;
      cur.swap(next);
    }
    const GroupPaths& last = gp[seq[k - 1]];
    for (size_t y = 0; y < last.size(); ++y) {
      const double total = cur[y] + w.at(last.members[y], first.members[e0]);
      if (!(total < best)) continue;
      best = total;
      if (order == nullptr) continue;
      std::vector<std::vector<size_t>> legs(k);
      size_t at = y;
      for (size_t t = k - 1; t > 0; --t) {
        const size_t e = via_entry[t][at];
        legs[t] = gp[seq[t]].path[e * gp[seq[t]].size() + at];
        at = via_exit[t][e];
      }
      legs[0] = first.path[e0 * first.size() + at];
      order->clear();
      for (const auto& leg : legs) order->insert(order->end(), leg.begin(), leg.end());
    }
  }
  return best;
}

// Group order: every order when few groups, else nearest neighbour then 2-opt on the group sequence.
std::vector<size_t> group_order(const Square& w, const std::vector<GroupPaths>& gp, size_t enumerate_max) {
  const size_t k = gp.size();
  std::vector<size_t> seq(k);
  std::iota(seq.begin(), seq.end(), size_t{0});
  if (k <= enumerate_max) {
    std::vector<size_t> best = seq;
    double best_w = tour(w, gp, seq, nullptr);
    while (std::next_permutation(seq.begin() + 1, seq.end()))
      if (const double c = tour(w, gp, seq, nullptr); c < best_w) best_w = c, best = seq;
    return best;
  }
  auto dist = [&](size_t a, size_t b) {
    double d = kInf;
    for (size_t x : gp[a].members)
      for (size_t y : gp[b].members) d = std::min(d, w.at(x, y));
    return d;
  };
  for (size_t t = 1; t < k; ++t) {
    const auto nearest = std::min_element(seq.begin() + static_cast<long>(t), seq.end(),
                                          [&](size_t a, size_t b) { return dist(seq[t - 1], a) < dist(seq[t - 1], b); });
    std::iter_swap(seq.begin() + static_cast<long>(t), nearest);
  }
  double cur = tour(w, gp, seq, nullptr);
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 1; i + 1 < k; ++i)
      for (size_t j = i + 1; j < k; ++j) {
        std::reverse(seq.begin() + static_cast<long>(i), seq.begin() + static_cast<long>(j) + 1);
        if (const double c = tour(w, gp, seq, nullptr); c < cur - 1e-9) {
          cur = c, any = true;
        } else {
          std::reverse(seq.begin() + static_cast<long>(i), seq.begin() + static_cast<long>(j) + 1);
        }
      }
  }
  return seq;
}

}  // namespace

RingPlan ring_heuristic(const Square& w, std::span<const int> group, const RingHeuristicOptions& opts) {
  const auto groups = members_by_group(group);
  if (groups.empty()) return {{}, 0.0, false};
  std::vector<GroupPaths> gp;
  for (const auto& m : groups) gp.push_back(detail::group_paths(w, m, opts.exact_group_max, opts.boundary_hosts));
  const std::vector<size_t> seq = group_order(w, gp, opts.enumerate_groups_max);
  RingPlan plan{{}, 0.0, false};
  (void)tour(w, gp, seq, &plan.order);
  detail::improve_ring(w, group, plan.order, opts.exact_group_max);
  plan.weight = ring_weight(w, plan.order);
  return plan;
}

}  // namespace phub::topo

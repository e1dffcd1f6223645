// Exact group-contiguous ring: Held-Karp paths inside groups, dynamic program over sets of groups.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "held_karp.hpp"
#include "phub/topo/ring.hpp"

namespace phub::topo {
namespace {

using detail::HeldKarp;
using detail::kInf;
using detail::path_table;

constexpr double kBudgetOps = 4e7;
constexpr size_t kMaxGroupSize = 14;
constexpr size_t kMaxGroups = 14;

struct Leg {
  size_t group, entry, exit;  // entry/exit are positions within the group
};

std::vector<size_t> expand(const Square& w, const std::vector<std::vector<size_t>>& groups, const std::vector<Leg>& legs) {
  std::vector<size_t> order;
  for (const Leg& leg : legs) {
    const auto& m = groups[leg.group];
    if (m.size() == 1) { order.push_back(m[0]); continue; }
    for (size_t p : HeldKarp(w, m, leg.entry).path(leg.exit)) order.push_back(m[p]);
  }
  return order;
}

}  // namespace

bool ring_exact_feasible(std::span<const int> group) {
  const auto groups = members_by_group(group);
  if (groups.empty() || groups.size() > kMaxGroups) return false;
  double ops = 0.0, n = 0.0, smallest = 1e9;
  for (const auto& m : groups) {
    const double s = static_cast<double>(m.size());
    if (m.size() > kMaxGroupSize) return false;
    ops += s * s * s * static_cast<double>(size_t{1} << m.size());
    n += s;
    smallest = std::min(smallest, s);
  }
  ops += smallest * static_cast<double>(size_t{1} << (groups.size() - 1)) * n * n;
  return ops <= kBudgetOps;
}

RingPlan ring_exact(const Square& w, std::span<const int> group) {
  const auto groups = members_by_group(group);
  RingPlan plan{{}, kInf, true};
  if (groups.empty()) return {{}, 0.0, true};
  std::vector<std::vector<double>> paths;
  for (const auto& m : groups) paths.push_back(path_table(w, m));
  const size_t k = groups.size(), n = w.n;
  // The ring starts with the smallest group (any rotation is the same ring).
  size_t first = 0;
  for (size_t g = 0; g < k; ++g)
    if (groups[g].size() < groups[first].size()) first = g;
  std::vector<size_t> rest;
  for (size_t g = 0; g < k; ++g)
    if (g != first) rest.push_back(g);
  const auto& f = groups[first];
  const size_t sf = f.size(), full = (size_t{1} << rest.size()) - 1;

  std::vector<double> dp((full + 1) * n), into(n);
  std::vector<size_t> par_exit((full + 1) * n), par_entry((full + 1) * n), into_from(n);
  for (size_t e0 = 0; e0 < sf; ++e0) {
    std::fill(dp.begin(), dp.end(), kInf);
    for (size_t x0 = 0; x0 < sf; ++x0) dp[f[x0]] = paths[first][e0 * sf + x0];
    for (size_t mask = 0; mask < full; ++mask)
      for (size_t r = 0; r < rest.size(); ++r) {
        if (mask >> r & 1) continue;
        const auto& m = groups[rest[r]];
        const size_t s = m.size(), next = mask | size_t{1} << r;
        for (size_t e = 0; e < s; ++e) {
          into[e] = kInf;
          for (size_t x = 0; x < n; ++x) {
            const double c = dp[mask * n + x] + w.at(x, m[e]);
            if (c < into[e]) into[e] = c, into_from[e] = x;
          }
        }
        for (size_t y = 0; y < s; ++y)
          for (size_t e = 0; e < s; ++e) {
            const double c = into[e] + paths[rest[r]][e * s + y];
            if (c < dp[next * n + m[y]]) {
              dp[next * n + m[y]] = c;
              par_exit[next * n + m[y]] = into_from[e];
              par_entry[next * n + m[y]] = e;
            }
          }
      }
    for (size_t y = 0; y < n; ++y) {
      const double total = dp[full * n + y] + w.at(y, f[e0]);
      if (!(total < plan.weight)) continue;
      // Walk the parents back to the first group, then expand every leg into members.
      std::vector<Leg> legs;
      size_t mask = full, at = y;
      while (mask != 0) {
        const size_t r = static_cast<size_t>(std::find_if(rest.begin(), rest.end(), [&](size_t g) {
                           return std::find(groups[g].begin(), groups[g].end(), at) != groups[g].end();
                         }) - rest.begin());
        const auto& m = groups[rest[r]];
        const size_t exit = static_cast<size_t>(std::find(m.begin(), m.end(), at) - m.begin());
        legs.push_back({rest[r], par_entry[mask * n + at], exit});
        at = par_exit[mask * n + at];
        mask &= ~(size_t{1} << r);
      }
      legs.push_back({first, e0, static_cast<size_t>(std::find(f.begin(), f.end(), at) - f.begin())});
      std::reverse(legs.begin(), legs.end());
      plan.weight = total;
      plan.order = expand(w, groups, legs);
    }
  }
  plan.weight = ring_weight(w, plan.order);
  return plan;
}

}  // namespace phub::topo

// Per-group entry-to-exit path tables for the ring heuristic.
#include "group_paths.hpp"

#include <algorithm>
#include <numeric>

#include "held_karp.hpp"

namespace phub::topo::detail {
namespace {

constexpr size_t kBoundaryFrom = 64;

// Nearest-neighbour chain from `from` through the other members, ending at `to`, then 2-opt inside.
std::vector<size_t> heuristic_path(const Square& w, const std::vector<size_t>& m, size_t from, size_t to) {
  std::vector<size_t> p{from};
  std::vector<bool> used(w.n, false);
  used[from] = used[to] = true;
  for (size_t left = m.size() - 2; left > 0; --left) {
    size_t next = to;
    for (size_t c : m)
      if (!used[c] && (next == to || w.at(p.back(), c) < w.at(p.back(), next))) next = c;
    p.push_back(next), used[next] = true;
  }
  p.push_back(to);
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 1; i + 2 < p.size(); ++i)
      for (size_t j = i + 1; j + 1 < p.size(); ++j)
        if (w.at(p[i - 1], p[j]) + w.at(p[i], p[j + 1]) < w.at(p[i - 1], p[i]) + w.at(p[j], p[j + 1]) - 1e-9) {
          std::reverse(p.begin() + static_cast<long>(i), p.begin() + static_cast<long>(j) + 1);
          any = true;
        }
  }
  return p;
}

// Members allowed as entry/exit: all of them, or for big groups those nearest to any outside host.
std::vector<bool> candidates(const Square& w, const std::vector<size_t>& m, size_t boundary) {
  std::vector<bool> cand(m.size(), true);
  if (m.size() <= kBoundaryFrom || boundary >= m.size()) return cand;
  std::vector<bool> inside(w.n, false);
  for (size_t h : m) inside[h] = true;
  std::vector<double> reach(m.size(), kInf);
  for (size_t a = 0; a < m.size(); ++a)
    for (size_t o = 0; o < w.n; ++o)
      if (!inside[o]) reach[a] = std::min(reach[a], w.at(m[a], o));
  std::vector<size_t> idx(m.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return reach[a] < reach[b]; });
  std::fill(cand.begin(), cand.end(), false);
  for (size_t r = 0; r < boundary; ++r) cand[idx[r]] = true;
  return cand;
}

}  // namespace

GroupPaths group_paths(const Square& w, const std::vector<size_t>& members, size_t exact_max, size_t boundary) {
  const size_t s = members.size();
  GroupPaths g{members, std::vector<double>(s * s, kInf), std::vector<std::vector<size_t>>(s * s)};
  if (s == 1) {
    g.cost[0] = 0.0, g.path[0] = {members[0]};
    return g;
  }
  const std::vector<bool> cand = candidates(w, members, boundary);
  for (size_t e = 0; e < s; ++e) {
    if (!cand[e]) continue;
    if (s <= exact_max) {
      const HeldKarp hk(w, members, e);
      for (size_t x = 0; x < s; ++x) {
        if (x == e) continue;
        g.cost[e * s + x] = hk.full(x);
        for (size_t p : hk.path(x)) g.path[e * s + x].push_back(members[p]);
      }
      continue;
    }
    for (size_t x = 0; x < s; ++x) {
      if (x == e || !cand[x]) continue;
      g.path[e * s + x] = heuristic_path(w, members, members[e], members[x]);
      double c = 0.0;
      for (size_t p = 0; p + 1 < s; ++p) c += w.at(g.path[e * s + x][p], g.path[e * s + x][p + 1]);
      g.cost[e * s + x] = c;
    }
  }
  return g;
}

}  // namespace phub::topo::detail

// Held-Karp shortest Hamiltonian paths inside one group (shared by the exact and heuristic ring planners).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "phub/topo/square.hpp"

namespace phub::topo::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Shortest Hamiltonian paths over `m` that start at m[start], for every subset and end.
class HeldKarp {
 public:
  HeldKarp(const Square& w, const std::vector<size_t>& m, size_t start) : s_(m.size()) {
    dp_.assign((size_t{1} << s_) * s_, kInf);
    prev_.assign(dp_.size(), 0);
    dp_[(size_t{1} << start) * s_ + start] = 0.0;
    for (size_t mask = 1; mask < (size_t{1} << s_); ++mask) {
      if (!(mask >> start & 1)) continue;
      for (size_t v = 0; v < s_; ++v) {
        const double base = dp_[mask * s_ + v];
        if (base == kInf) continue;
        for (size_t u = 0; u < s_; ++u) {
          if (mask >> u & 1) continue;
          const size_t next = (mask | size_t{1} << u) * s_ + u;
          const double c = base + w.at(m[v], m[u]);
          if (c < dp_[next]) dp_[next] = c, prev_[next] = static_cast<uint8_t>(v);
        }
      }
    }
  }
  [[nodiscard]] double full(size_t end) const { return dp_[((size_t{1} << s_) - 1) * s_ + end]; }
  // Member positions of the best full path ending at `end`, from start to end.
  [[nodiscard]] std::vector<size_t> path(size_t end) const {
    std::vector<size_t> rev;
    size_t mask = (size_t{1} << s_) - 1, v = end;
    while (mask != 0) {
      rev.push_back(v);
      const size_t p = prev_[mask * s_ + v];
      mask &= ~(size_t{1} << v);
      v = p;
    }
    return {rev.rbegin(), rev.rend()};
  }

 private:
  size_t s_;
  std::vector<double> dp_;
  std::vector<uint8_t> prev_;
};

// best[e * s + x]: cheapest path through all of a group from member e to member x.
inline std::vector<double> path_table(const Square& w, const std::vector<size_t>& m) {
  const size_t s = m.size();
  std::vector<double> best(s * s, kInf);
  if (s == 1) best[0] = 0.0;
  for (size_t e = 0; e < s && s > 1; ++e) {
    const HeldKarp hk(w, m, e);
    for (size_t x = 0; x < s; ++x)
      if (x != e) best[e * s + x] = hk.full(x);
  }
  return best;
}

}  // namespace phub::topo::detail

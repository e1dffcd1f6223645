// Contiguity-preserving local search for ring orders.
#include "ring_improve.hpp"

#include <algorithm>

#include "held_karp.hpp"

namespace phub::topo::detail {
namespace {

constexpr double kEps = 1e-9;

class Improver {
 public:
  Improver(const Square& w, std::span<const int> group, std::vector<size_t>& o, size_t exact_arc_max)
      : w_(w), g_(group), o_(o), exact_arc_max_(exact_arc_max) {}

  void run() {
    while (two_opt() || or_opt() || reopt_arcs()) {
    }
  }

 private:
  [[nodiscard]] int grp(size_t pos) const { return g_[o_[(pos + o_.size()) % o_.size()]]; }
  [[nodiscard]] double wt(size_t a, size_t b) const { return w_.at(o_[a % o_.size()], o_[b % o_.size()]); }
  [[nodiscard]] bool arc_start(size_t pos) const { return pos == 0 || grp(pos - 1) != grp(pos); }
  [[nodiscard]] bool arc_end(size_t pos) const { return pos + 1 == o_.size() || grp(pos) != grp(pos + 1); }

  // Rotates so that position 0 starts an arc: then no arc wraps around the end of the vector.
  void align() {
    for (size_t p = 0; p < o_.size(); ++p)
      if (grp(p + o_.size() - 1) != grp(p)) {
        std::rotate(o_.begin(), o_.begin() + static_cast<long>(p), o_.end());
        return;
      }
  }

  bool two_opt() {
    align();
    const size_t n = o_.size();
    bool any = false;
    for (size_t i = 0; i + 1 < n; ++i)
      for (size_t j = i + 1; j < n; ++j) {
        if (i == 0 && j == n - 1) continue;
        const bool inside = grp(i) == grp(j);
        if (!inside && !(arc_start(i) && arc_end(j))) continue;
        const double delta = wt(i + n - 1, j) + wt(i, j + 1) - wt(i + n - 1, i) - wt(j, j + 1);
        if (delta < -kEps) {
          std::reverse(o_.begin() + static_cast<long>(i), o_.begin() + static_cast<long>(j) + 1);
          any = true;
        }
      }
    return any;
  }

  // Moves a segment [i, i+len) elsewhere: short runs inside their own arc, whole arcs between two arcs.
  bool or_opt() {
    align();
    const size_t n = o_.size();
    for (size_t i = 0; i < n; ++i)
      for (size_t len = 1; i + len <= n && len < n - 1; ++len) {
        const size_t last = i + len - 1;
        if (grp(last) != grp(i)) break;
        const bool whole = arc_start(i) && arc_end(last);
        if (!whole && len > 3) continue;
        if (whole && !arc_end(last)) continue;
        if (try_move(i, len, whole)) return true;
      }
    return false;
  }

  bool try_move(size_t i, size_t len, bool whole) {
    const size_t n = o_.size(), last = i + len - 1;
    const int g = grp(i);
    const double removed = wt(i + n - 1, i) + wt(last, last + 1) - wt(i + n - 1, last + 1);
    for (size_t p = 0; p < n; ++p) {
      if (p + 1 >= i && p <= last) continue;        // edges touching the segment
      if ((p + 1) % n == i) continue;
      const bool ok = whole ? grp(p) != grp(p + 1) : (grp(p) == g || grp(p + 1) == g);
      if (!ok) continue;
      for (const bool rev : {false, true}) {
        const size_t a = rev ? last : i, b = rev ? i : last;
        const double added = wt(p, a) + wt(b, p + 1) - wt(p, p + 1);
        if (added - removed < -kEps) {
          apply(i, len, p, rev);
          return true;
        }
      }
    }
    return false;
  }

  // Replaces each arc of 3..exact_arc_max_ hosts by its best Hamiltonian path between the arc's neighbours.
  bool reopt_arcs() {
    align();
    const size_t n = o_.size();
    bool any = false;
    for (size_t i = 0, j = 0; i < n; i = j + 1) {
      for (j = i; j + 1 < n && grp(j + 1) == grp(i);) ++j;
      const size_t s = j - i + 1;
      if (s < 3 || s > exact_arc_max_ || s == n) continue;
      const std::vector<size_t> m(o_.begin() + static_cast<long>(i), o_.begin() + static_cast<long>(j) + 1);
      const size_t before = o_[(i + n - 1) % n], after = o_[(j + 1) % n];
      double old = w_.at(before, m.front()) + w_.at(m.back(), after);
      for (size_t p = 0; p + 1 < s; ++p) old += w_.at(m[p], m[p + 1]);
      double best = old;
      std::vector<size_t> path;
      for (size_t e = 0; e < s; ++e) {
        const HeldKarp hk(w_, m, e);
        for (size_t x = 0; x < s; ++x) {
          const double c = x == e ? kInf : w_.at(before, m[e]) + hk.full(x) + w_.at(m[x], after);
          if (c < best - kEps) best = c, path = hk.path(x);
        }
      }
      if (path.empty()) continue;
      for (size_t p = 0; p < s; ++p) o_[i + p] = m[path[p]];
      any = true;
    }
    return any;
  }

  void apply(size_t i, size_t len, size_t p, bool rev) {
    const size_t after = o_[p];
    std::vector<size_t> seg(o_.begin() + static_cast<long>(i), o_.begin() + static_cast<long>(i + len));
    if (rev) std::reverse(seg.begin(), seg.end());
    o_.erase(o_.begin() + static_cast<long>(i), o_.begin() + static_cast<long>(i + len));
    const auto at = std::find(o_.begin(), o_.end(), after) + 1;
    o_.insert(at, seg.begin(), seg.end());
  }

  const Square& w_;
  std::span<const int> g_;
  std::vector<size_t>& o_;
  size_t exact_arc_max_;
};

}  // namespace

void improve_ring(const Square& w, std::span<const int> group, std::vector<size_t>& order, size_t exact_arc_max) {
  if (order.size() > 3) Improver(w, group, order, exact_arc_max).run();
}

}  // namespace phub::topo::detail

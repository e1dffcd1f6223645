// Locality groups: host exclusion, robust agglomerative clustering, gap cut and per-host confidence.
#include "phub/topo/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace phub::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double median_of(std::vector<double>& v) {
  if (v.empty()) return kInf;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(mid), v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<long>(mid));
  return 0.5 * (lo + hi);
}

// Drops, one at a time, the host missing the largest share of its pairs while that share is too high.
std::vector<size_t> reachable(const Matrix& m, double max_missing_fraction) {
  std::vector<size_t> in(m.size());
  std::iota(in.begin(), in.end(), size_t{0});
  while (in.size() > 1) {
    size_t worst = 0, worst_missing = 0;
    for (size_t a = 0; a < in.size(); ++a) {
      size_t missing = 0;
      for (size_t b : in) missing += m.at(in[a], b).present ? 0 : 1;
      if (missing > worst_missing) worst = a, worst_missing = missing;
    }
    if (static_cast<double>(worst_missing) <= max_missing_fraction * static_cast<double>(in.size() - 1)) break;
    in.erase(in.begin() + static_cast<long>(worst));
  }
  return in;
}

// Log-scale dissimilarity of the reachable hosts from the minimum RTT (load and queueing only ever add
// to a sample, and they come in bursts that hit whole probe rounds); NaN where the pair is missing.
Square dissimilarity(const Matrix& m, const std::vector<size_t>& in) {
  double bw_max = 0.0;
  for (size_t a : in)
    for (size_t b : in) bw_max = std::max(bw_max, m.at(a, b).bw_bytes_per_s);
  Square d(in.size());
  for (size_t a = 0; a < in.size(); ++a)
    for (size_t b = 0; b < in.size(); ++b) {
      const PairStats& p = m.at(in[a], in[b]);
      if (a == b) continue;
      if (!p.present) { d.at(a, b) = std::nan(""); continue; }
      double v = std::log(std::max(p.min_us, 1e-3));
      if (bw_max > 0.0 && p.bw_bytes_per_s > 0.0) v += std::log(bw_max / p.bw_bytes_per_s);
      d.at(a, b) = v;
    }
  return d;
}

// Lower quartile (nearest rank) of the cross pairs: queueing only ever adds delay, so high outliers are
// common and low ones are not; the quartile ignores up to three quarters of inflated pairs.
double linkage(const Square& d, const std::vector<size_t>& x, const std::vector<size_t>& y,
               std::vector<double>& scratch) {
  scratch.clear();
  for (size_t a : x)
    for (size_t b : y)
      if (!std::isnan(d.at(a, b))) scratch.push_back(d.at(a, b));
  if (scratch.empty()) return kInf;
  const size_t q = (scratch.size() - 1) / 4;
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<long>(q), scratch.end());
  return scratch[q];
}

struct Merge {
  size_t a, b;  // any member of each side
  double height;
};

std::vector<Merge> agglomerate(const Square& d) {
  std::vector<std::vector<size_t>> cl(d.n);
  for (size_t i = 0; i < d.n; ++i) cl[i] = {i};
  std::vector<double> scratch;
  Square link(d.n, kInf);
  for (size_t a = 0; a < d.n; ++a)
    for (size_t b = a + 1; b < d.n; ++b) link.at(a, b) = link.at(b, a) = linkage(d, cl[a], cl[b], scratch);
  std::vector<bool> alive(d.n, true);
  std::vector<Merge> merges;
  for (size_t step = 1; step < d.n; ++step) {
    size_t ba = 0, bb = 0;
    double best = std::numeric_limits<double>::max();
    for (size_t a = 0; a < d.n; ++a)
      for (size_t b = a + 1; alive[a] && b < d.n; ++b)
        if (alive[b] && link.at(a, b) < best) best = link.at(a, b), ba = a, bb = b;
    if (ba == bb) {  // only unlinked (all-missing) pairs remain: join any two
      ba = static_cast<size_t>(std::find(alive.begin(), alive.end(), true) - alive.begin());
      bb = static_cast<size_t>(std::find(alive.begin() + static_cast<long>(ba) + 1, alive.end(), true) -
                               alive.begin());
    }
    merges.push_back({cl[ba].front(), cl[bb].front(), best == std::numeric_limits<double>::max() ? kInf : best});
    cl[ba].insert(cl[ba].end(), cl[bb].begin(), cl[bb].end());
    alive[bb] = false;
    for (size_t c = 0; c < d.n; ++c)
      if (alive[c] && c != ba) link.at(ba, c) = link.at(c, ba) = linkage(d, cl[ba], cl[c], scratch);
  }
  return merges;
}

size_t find_root(std::vector<size_t>& parent, size_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

// Labels 0..k-1 by first member after joining every merge at or below `level`.
std::vector<int> cut(size_t n, const std::vector<Merge>& merges, double level) {
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), size_t{0});
  for (const Merge& mg : merges)
    if (mg.height <= level) parent[find_root(parent, mg.a)] = find_root(parent, mg.b);
  std::vector<int> label(n, -1), root_label(n, -1);
  int next = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t r = find_root(parent, i);
    if (root_label[r] < 0) root_label[r] = next++;
    label[i] = root_label[r];
  }
  return label;
}

// Margin (log units) between a host's own group and the nearest other group.
double margin(const Square& d, const std::vector<int>& label, size_t i, double singleton_level,
              std::vector<double>& scratch) {
  const int groups = *std::max_element(label.begin(), label.end()) + 1;
  double own = singleton_level, nearest = kInf;
  for (int g = 0; g < groups; ++g) {
    scratch.clear();
    for (size_t j = 0; j < d.n; ++j)
      if (j != i && label[j] == g && !std::isnan(d.at(i, j))) scratch.push_back(d.at(i, j));
    if (scratch.empty()) continue;
    const double med = median_of(scratch);
    if (g == label[i]) own = med;
    else nearest = std::min(nearest, med);
  }
  return nearest - own;
}

}  // namespace

Clustering cluster(const Matrix& m, const ClusterOptions& opts) {
  Clustering out;
  out.group.assign(m.size(), -1);
  out.confidence.assign(m.size(), 0.0);
  out.flagged.assign(m.size(), false);
  const std::vector<size_t> in = reachable(m, opts.max_missing_fraction);
  if (in.empty()) return out;
  const Square d = dissimilarity(m, in);
  const std::vector<Merge> merges = agglomerate(d);
  std::vector<double> h;
  for (const Merge& mg : merges) h.push_back(mg.height);
  std::sort(h.begin(), h.end());

  // Largest gap between successive merge heights; ties prefer more groups (lower cut).
  double best_gap = 0.0, level = kInf;
  for (size_t c = 1; c < h.size(); ++c) {
    const double gap = h[c] - h[c - 1];
    if (gap > best_gap) best_gap = gap, level = h[c - 1];
  }
  const bool split = best_gap >= std::log(opts.min_separation);
  const std::vector<int> label = split ? cut(in.size(), merges, level) : std::vector<int>(in.size(), 0);
  out.groups = *std::max_element(label.begin(), label.end()) + 1;
  out.separation = std::isinf(best_gap) ? kInf : std::exp(best_gap);

  std::vector<double> scratch;
  const double full_margin = 2.0 * std::log(std::max(opts.min_separation, 1.0 + 1e-9));
  for (size_t a = 0; a < in.size(); ++a) {
    const size_t host = in[a];
    double conf = 1.0;
    if (out.groups > 1) conf = std::clamp(margin(d, label, a, split ? level : 0.0, scratch) / full_margin, 0.0, 1.0);
    size_t missing = 0;
    double loss = 0.0;
    for (size_t b : in) {
      missing += m.at(host, b).present ? 0 : 1;
      loss += b == host ? 0.0 : m.at(host, b).loss();
    }
    const double others = static_cast<double>(std::max<size_t>(in.size() - 1, 1));
    loss /= others;
    conf *= (1.0 - static_cast<double>(missing) / others) * (1.0 - loss);
    out.group[host] = label[a];
    out.confidence[host] = conf;
    out.flagged[host] = missing > 0 || loss > opts.flaky_loss;
  }
  return out;
}

std::vector<size_t> included_hosts(const Clustering& c) {
  std::vector<size_t> in;
  for (size_t i = 0; i < c.group.size(); ++i)
    if (c.group[i] >= 0) in.push_back(i);
  return in;
}

}  // namespace phub::topo

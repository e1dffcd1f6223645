// Synthetic locality matrices for the lib/topo tests.
#include "synth.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <cstdio>
#include <string>

namespace phub::topo::test {

Synth make_synth(const SynthOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto uni = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  std::vector<int> truth;
  for (size_t g = 0; g < o.sizes.size(); ++g) truth.insert(truth.end(), o.sizes[g], static_cast<int>(g));
  if (o.shuffle) std::shuffle(truth.begin(), truth.end(), rng);
  const size_t k = o.sizes.size(), n = truth.size();
  std::vector<double> base(k * k);
  for (size_t g = 0; g < k; ++g)
    for (size_t h = g; h < k; ++h)
      base[g * k + h] = base[h * k + g] = g == h ? uni(o.intra_lo_us, o.intra_hi_us) : uni(o.inter_lo_us, o.inter_hi_us);
  std::vector<Host> hosts;
  for (size_t i = 0; i < n; ++i) {
    char name[32], addr[32];
    std::snprintf(name, sizeof name, "h%zu", i);
    std::snprintf(addr, sizeof addr, "198.18.%zu.%zu", i / 200, i % 200 + 1);
    hosts.push_back({name, addr, 7700});
  }
  Synth s{Matrix(std::move(hosts)), truth};
  // An outlier never hits more than a quarter (at least one) of a host's pairs inside its group: beyond
  // that the host is indistinguishable from one that really sits elsewhere.
  std::vector<size_t> intra_outliers(n, 0);
  auto cap = [&](size_t i) { return std::max<size_t>(1, (o.sizes[static_cast<size_t>(truth[i])] - 1) / 4); };
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      double rtt = base[static_cast<size_t>(truth[i]) * k + static_cast<size_t>(truth[j])] * uni(1 - o.jitter, 1 + o.jitter);
      const bool intra = truth[i] == truth[j];
      if (uni(0, 1) < o.outlier_fraction && (!intra || (intra_outliers[i] < cap(i) && intra_outliers[j] < cap(j)))) {
        rtt *= uni(3, 8);
        if (intra) ++intra_outliers[i], ++intra_outliers[j];
      }
      PairStats p;
      p.present = true;
      p.min_us = 0.9 * rtt, p.median_us = rtt, p.p90_us = 1.3 * rtt;
      p.sent = p.received = 32;
      s.matrix.set(i, j, p);
    }
  return s;
}

std::vector<size_t> random_sizes(size_t k, size_t lo, size_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> sizes(k);
  for (auto& s : sizes) s = std::uniform_int_distribution<size_t>(lo, hi)(rng);
  return sizes;
}

}  // namespace phub::topo::test

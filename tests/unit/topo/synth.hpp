// Synthetic locality matrices with known groups, jitter, outliers and missing pairs (test helper).
#pragma once

#include <cstdint>
#include <vector>

#include "phub/topo/matrix.hpp"

namespace phub::topo::test {

struct SynthOptions {
  std::vector<size_t> sizes;        // hosts per group
  double jitter = 0.3;              // each entry scaled by U(1-jitter, 1+jitter)
  double outlier_fraction = 0.0;    // share of pairs scaled by U(3, 8)
  double intra_lo_us = 20, intra_hi_us = 40;   // per-group base RTT
  double inter_lo_us = 150, inter_hi_us = 400; // per group-pair base RTT
  bool shuffle = true;              // host order shuffled (ground truth follows)
  uint64_t seed = 1;
};

struct Synth {
  Matrix matrix;
  std::vector<int> truth;  // group of each host
};

[[nodiscard]] Synth make_synth(const SynthOptions& o);

// Random group sizes in [lo, hi] for k groups.
[[nodiscard]] std::vector<size_t> random_sizes(size_t k, size_t lo, size_t hi, uint64_t seed);

}  // namespace phub::topo::test

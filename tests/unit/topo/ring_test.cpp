// Ring planner tests: exact DP against brute force, heuristic within its bound, contiguity, large N.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "phub/topo/ring.hpp"
#include "synth.hpp"

namespace phub::topo {
namespace {

// Brute force over all orders starting with host 0 that keep groups contiguous.
double brute_force(const Square& w, const std::vector<int>& group) {
  std::vector<size_t> order(w.n);
  std::iota(order.begin(), order.end(), size_t{0});
  double best = 1e300;
  do {
    if (groups_contiguous(group, order)) best = std::min(best, ring_weight(w, order));
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return best;
}

struct Instance {
  Square w;
  std::vector<int> group;
};

Instance random_instance(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t k = std::uniform_int_distribution<size_t>(1, std::min<size_t>(n, 4))(rng);
  test::SynthOptions o;
  o.sizes.assign(k, 1);
  for (size_t extra = k; extra < n; ++extra) ++o.sizes[std::uniform_int_distribution<size_t>(0, k - 1)(rng)];
  o.jitter = 0.5;  // rough matrices make member order matter
  o.seed = seed;
  test::Synth s = test::make_synth(o);
  return {s.matrix.weights_us(), s.truth};
}

TEST(Ring, ContiguityCheck) {
  const std::vector<int> g{0, 0, 1, 1, 2};
  const std::vector<size_t> ok{1, 2, 3, 4, 0}, wraps{0, 2, 3, 4, 1}, bad{0, 2, 1, 3, 4};
  EXPECT_TRUE(groups_contiguous(g, ok));
  EXPECT_TRUE(groups_contiguous(g, wraps));
  EXPECT_FALSE(groups_contiguous(g, bad));
}

TEST(Ring, ExactMatchesBruteForce) {
  for (size_t n = 2; n <= 9; ++n)
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      const Instance in = random_instance(n, seed * 31 + n);
      ASSERT_TRUE(ring_exact_feasible(in.group));
      const RingPlan p = ring_exact(in.w, in.group);
      ASSERT_EQ(p.order.size(), n);
      EXPECT_TRUE(p.exact);
      EXPECT_TRUE(groups_contiguous(in.group, p.order));
      EXPECT_NEAR(p.weight, brute_force(in.w, in.group), 1e-6) << "n=" << n << " seed=" << seed;
    }
}

// Default settings, and every approximation forced on (heuristic paths in every group of 3+ hosts, 2-opt
// search over the group order): both stay within the documented bound of the exact optimum.
TEST(Ring, HeuristicWithinBoundOfExact) {
  const RingHeuristicOptions forced{2, 1, 8};
  for (const RingHeuristicOptions& opts : {RingHeuristicOptions{}, forced}) {
    double worst = 1.0;
    for (size_t n = 3; n <= 10; ++n)
      for (uint64_t seed = 1; seed <= 100; ++seed) {
        const Instance in = random_instance(n, seed * 1009 + n);
        const RingPlan exact = ring_exact(in.w, in.group);
        const RingPlan heur = ring_heuristic(in.w, in.group, opts);
        ASSERT_EQ(heur.order.size(), n);
        EXPECT_TRUE(groups_contiguous(in.group, heur.order));
        std::vector<size_t> sorted = heur.order;
        std::sort(sorted.begin(), sorted.end());
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
        const double ratio = heur.weight / exact.weight;
        EXPECT_GE(ratio, 1.0 - 1e-9);
        EXPECT_LE(ratio, kRingHeuristicBound) << "n=" << n << " seed=" << seed;
        worst = std::max(worst, ratio);
      }
    std::printf("heuristic (exact_group_max=%zu) / exact, worst of 800: %.4f (bound %.2f)\n", opts.exact_group_max,
                worst, kRingHeuristicBound);
  }
}

TEST(Ring, LargeInstanceUsesHeuristicAndStaysGrouped) {
  test::SynthOptions o;
  o.sizes = test::random_sizes(8, 10, 30, 5);
  o.seed = 9;
  const test::Synth s = test::make_synth(o);
  const Square w = s.matrix.weights_us();
  EXPECT_FALSE(ring_exact_feasible(s.truth));
  const auto t0 = std::chrono::steady_clock::now();
  const RingPlan p = plan_ring(w, s.truth);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(p.exact);
  EXPECT_EQ(p.order.size(), s.matrix.size());
  EXPECT_TRUE(groups_contiguous(s.truth, p.order));
  EXPECT_LT(secs, 10.0);
  // Never worse than simply listing the groups one after another.
  std::vector<size_t> by_group(s.matrix.size());
  std::iota(by_group.begin(), by_group.end(), size_t{0});
  std::stable_sort(by_group.begin(), by_group.end(), [&](size_t a, size_t b) { return s.truth[a] < s.truth[b]; });
  EXPECT_LT(p.weight, ring_weight(w, by_group));
}

}  // namespace
}  // namespace phub::topo

// Clustering tests: exact recovery of 2..8 uneven groups under jitter and outliers, missing and lossy hosts.
#include <gtest/gtest.h>

#include <algorithm>

#include "phub/topo/ari.hpp"
#include "phub/topo/cluster.hpp"
#include "synth.hpp"

namespace phub::topo {
namespace {

TEST(Ari, IdenticalUpToRenamingIsOne) {
  const std::vector<int> a{0, 0, 1, 1, 2}, b{5, 5, 3, 3, 9};
  EXPECT_DOUBLE_EQ(adjusted_rand_index(a, b), 1.0);
}

TEST(Ari, HandComputedValue) {
  // Contingency {2,1,1}: index 1, row pairs 2, column pairs 3, expected 1, max 2.5 -> ARI 0.
  const std::vector<int> a{0, 0, 1, 1}, b{0, 0, 0, 1};
  EXPECT_NEAR(adjusted_rand_index(a, b), 0.0, 1e-12);
  const std::vector<int> c{0, 0, 1, 1, 1, 2}, d{0, 0, 1, 1, 2, 2};
  EXPECT_LT(adjusted_rand_index(c, d), 1.0);
  EXPECT_GT(adjusted_rand_index(c, d), 0.0);
}

TEST(Summarize, MinMedianP90) {
  const std::vector<double> v{9, 1, 5, 3, 7, 2, 8, 4, 6, 10};
  const PairStats s = summarize(v, 12);
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.min_us, 1);
  EXPECT_EQ(s.median_us, 5);
  EXPECT_EQ(s.p90_us, 9);
  EXPECT_NEAR(s.loss(), 2.0 / 12.0, 1e-12);
  EXPECT_FALSE(summarize({}, 4).present);
}

// 2..8 groups, uneven sizes (1..9 hosts), 30% jitter, shuffled order: exact recovery on every seed.
TEST(Cluster, RecoversUnevenGroupsWithJitter) {
  for (size_t k = 2; k <= 8; ++k)
    for (uint64_t seed = 1; seed <= 15; ++seed) {
      test::SynthOptions o;
      o.sizes = test::random_sizes(k, 1, 9, seed * 100 + k);
      o.sizes[0] = std::max<size_t>(o.sizes[0], 2);  // two lone hosts cannot tell one group from two
      o.seed = seed;
      const test::Synth s = test::make_synth(o);
      const Clustering c = cluster(s.matrix);
      EXPECT_EQ(c.groups, static_cast<int>(k)) << "k=" << k << " seed=" << seed;
      EXPECT_DOUBLE_EQ(adjusted_rand_index(c.group, s.truth), 1.0) << "k=" << k << " seed=" << seed;
      for (double conf : c.confidence) EXPECT_GT(conf, 0.5);
    }
}

// Outlier pairs (5%, RTT x3..x8) do not split or merge groups of at least 4 hosts.
TEST(Cluster, RecoversGroupsWithOutliers) {
  for (size_t k = 2; k <= 8; ++k)
    for (uint64_t seed = 1; seed <= 15; ++seed) {
      test::SynthOptions o;
      o.sizes = test::random_sizes(k, 4, 9, seed * 7 + k);
      o.outlier_fraction = 0.05;
      o.seed = seed + 1000;
      const test::Synth s = test::make_synth(o);
      const Clustering c = cluster(s.matrix);
      EXPECT_DOUBLE_EQ(adjusted_rand_index(c.group, s.truth), 1.0) << "k=" << k << " seed=" << seed;
    }
}

TEST(Cluster, NoStructureIsOneGroup) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    test::SynthOptions o;
    o.sizes = {12};
    o.seed = seed;
    const Clustering c = cluster(test::make_synth(o).matrix);
    EXPECT_EQ(c.groups, 1) << seed;
    EXPECT_LT(c.separation, 1.5);
  }
}

TEST(Cluster, CloseLevelsAreNotSplit) {
  // Two "groups" only 1.2x apart with 30% jitter: not evidence of locality, so one group.
  test::SynthOptions o;
  o.sizes = {6, 6};
  o.inter_lo_us = o.inter_hi_us = 36;
  o.intra_lo_us = o.intra_hi_us = 30;
  const Clustering c = cluster(test::make_synth(o).matrix);
  EXPECT_EQ(c.groups, 1);
}

TEST(Cluster, UnreachableHostExcludedPartialHostFlagged) {
  test::SynthOptions o;
  o.sizes = {4, 5, 3};
  test::Synth s = test::make_synth(o);
  const size_t dead = 2, partial = 7;
  for (size_t j = 0; j < s.matrix.size(); ++j)
    if (j != dead) s.matrix.set(dead, j, PairStats{});
  s.matrix.set(partial, (partial + 1) % s.matrix.size(), PairStats{});
  const Clustering c = cluster(s.matrix);
  EXPECT_EQ(c.group[dead], -1);
  EXPECT_EQ(c.confidence[dead], 0.0);
  EXPECT_TRUE(c.flagged[partial]);
  EXPECT_LT(c.confidence[partial], 1.0);
  std::vector<int> got, want;
  for (size_t i = 0; i < s.truth.size(); ++i)
    if (i != dead) got.push_back(c.group[i]), want.push_back(s.truth[i]);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(got, want), 1.0);
  EXPECT_EQ(included_hosts(c).size(), s.matrix.size() - 1);
}

TEST(Cluster, LossyHostFlagged) {
  test::SynthOptions o;
  o.sizes = {4, 4};
  test::Synth s = test::make_synth(o);
  for (size_t j = 1; j < s.matrix.size(); ++j) {
    PairStats p = s.matrix.at(0, j);
    p.received = p.sent / 2;
    s.matrix.set(0, j, p);
  }
  const Clustering c = cluster(s.matrix);
  EXPECT_TRUE(c.flagged[0]);
  EXPECT_FALSE(c.flagged[1]);
  EXPECT_LE(c.confidence[0], 0.5);
}

TEST(Cluster, BandwidthSeparatesEqualLatencyGroups) {
  // Same RTT everywhere, but pairs across the two halves get a quarter of the bandwidth.
  test::SynthOptions o;
  o.sizes = {5, 5};
  o.jitter = 0.05;
  o.inter_lo_us = o.inter_hi_us = 30;
  o.intra_lo_us = o.intra_hi_us = 30;
  test::Synth s = test::make_synth(o);
  for (size_t i = 0; i < s.matrix.size(); ++i)
    for (size_t j = i + 1; j < s.matrix.size(); ++j) {
      PairStats p = s.matrix.at(i, j);
      p.bw_bytes_per_s = s.truth[i] == s.truth[j] ? 1e9 : 2.5e8;
      s.matrix.set(i, j, p);
    }
  const Clustering c = cluster(s.matrix);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(c.group, s.truth), 1.0);
}

}  // namespace
}  // namespace phub::topo

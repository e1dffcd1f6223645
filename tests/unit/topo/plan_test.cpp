// Pipeline tests: cost model contention, tree and rack plans, predicted costs of planned vs given orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "phub/topo/ari.hpp"
#include "phub/topo/plan.hpp"
#include "phub/topo/schedule.hpp"
#include "synth.hpp"

namespace phub::topo {
namespace {

LinkModel flat_model(std::vector<int> group) {
  const size_t n = group.size();
  LinkModel lm{Square(n), Square(n, 1.0), std::move(group)};
  return lm;
}

TEST(Cost, CrossingTransfersShareTheUplink) {
  const LinkModel lm = flat_model({0, 0, 1, 1});
  const std::vector<size_t> grouped{0, 1, 2, 3}, interleaved{0, 2, 1, 3};
  const double g = ring_allreduce_s(lm, grouped, 4.0), i = ring_allreduce_s(lm, interleaved, 4.0);
  EXPECT_DOUBLE_EQ(g, 2.0 * 3.0 * 1.0);  // 6 steps of 1 byte at 1 B/s, one transfer per uplink
  EXPECT_DOUBLE_EQ(i / g, 2.0);          // two transfers leave each group at once
}

TEST(Cost, AlphaAddsPerStep) {
  LinkModel lm = flat_model({0, 0, 0});
  for (size_t a = 0; a < 3; ++a)
    for (size_t b = 0; b < 3; ++b) lm.alpha_s.at(a, b) = a == b ? 0.0 : 0.5;
  const std::vector<size_t> order{0, 1, 2};
  EXPECT_DOUBLE_EQ(ring_allreduce_s(lm, order, 3.0), 4.0 * (0.5 + 1.0));
  EXPECT_DOUBLE_EQ(tree_allreduce_s(lm, order, 3.0), 2.0 * 2.0 * (0.5 + 3.0));
}

TEST(Tree, BinomialParents) {
  const std::vector<long> want{-1, 0, 0, 2, 0, 4, 4, 6};
  EXPECT_EQ(binomial_parents(8), want);
}

TEST(Plan, ShuffledRacksGetGroupedPlans) {
  test::SynthOptions o;
  o.sizes = {4, 4, 4};
  o.seed = 3;
  const test::Synth s = test::make_synth(o);
  const Plan p = plan(s.matrix);
  EXPECT_DOUBLE_EQ(adjusted_rand_index(p.clustering.group, s.truth), 1.0);
  ASSERT_EQ(p.ring.size(), 12u);
  EXPECT_TRUE(p.ring_exact);
  EXPECT_TRUE(groups_contiguous(s.truth, p.ring));
  EXPECT_TRUE(groups_contiguous(s.truth, p.tree.order));
  EXPECT_EQ(std::set<size_t>(p.ring.begin(), p.ring.end()).size(), 12u);
  // With 4 hosts per group, a shuffled ring puts up to 4 transfers on an uplink: the plan must win clearly.
  EXPECT_LT(p.ring_cost.planned_s * 2.0, p.ring_cost.random_median_s);
  EXPECT_LE(p.ring_cost.planned_s, p.ring_cost.identity_s);
  EXPECT_LE(p.tree_cost.planned_s, p.tree_cost.random_median_s);
  ASSERT_EQ(p.racks.members.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    const auto& m = p.racks.members[r];
    EXPECT_EQ(m.size(), 4u);
    EXPECT_NE(std::find(m.begin(), m.end(), p.racks.hub[r]), m.end());
    for (size_t h : m) EXPECT_EQ(s.truth[h], s.truth[m.front()]);
  }
}

TEST(Plan, HubIsTheCentralHost) {
  // One rack where host 0 is much closer to the others than they are to each other.
  std::vector<Host> hosts(4);
  Matrix m(hosts);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = i + 1; j < 4; ++j) m.set(i, j, summarize(std::vector<double>{i == 0 ? 10.0 : 30.0}, 1));
  const RackPlan r = plan_racks(m.weights_us(), std::vector<int>{0, 0, 0, 0}, std::vector<size_t>{1, 2, 3, 0});
  ASSERT_EQ(r.hub.size(), 1u);
  EXPECT_EQ(r.hub[0], 0u);
}

TEST(Plan, ExcludedHostLeftOutOfEveryPlan) {
  test::SynthOptions o;
  o.sizes = {3, 3};
  test::Synth s = test::make_synth(o);
  for (size_t j = 1; j < s.matrix.size(); ++j) s.matrix.set(0, j, PairStats{});
  const Plan p = plan(s.matrix);
  EXPECT_EQ(p.ring.size(), 5u);
  EXPECT_EQ(std::find(p.ring.begin(), p.ring.end(), 0u), p.ring.end());
  EXPECT_EQ(std::find(p.tree.order.begin(), p.tree.order.end(), 0u), p.tree.order.end());
  EXPECT_EQ(p.clustering.group[0], -1);
}

TEST(Schedule, EveryPairOnceNoHostTwiceInARound) {
  for (size_t n = 2; n <= 17; ++n) {
    const auto rounds = tournament_rounds(n);
    EXPECT_EQ(rounds.size(), n % 2 == 0 ? n - 1 : n) << n;
    std::set<std::pair<size_t, size_t>> seen;
    for (const auto& round : rounds) {
      std::set<size_t> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_LT(b, n);
        EXPECT_TRUE(busy.insert(a).second);
        EXPECT_TRUE(busy.insert(b).second);
        EXPECT_TRUE(seen.insert({a, b}).second);
      }
      EXPECT_EQ(round.size(), n / 2);
    }
    EXPECT_EQ(seen.size(), n * (n - 1) / 2);
  }
}

}  // namespace
}  // namespace phub::topo

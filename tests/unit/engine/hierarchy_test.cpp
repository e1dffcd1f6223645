// The hierarchy fingerprint: two hubs' configs that differ only where hubs may differ agree; every field
// they must share changes exactly its own component, and the message names it.
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include "phub/engine/hierarchy.hpp"

namespace phub::engine {
namespace {

config::Config hub(const std::string& rack, uint32_t addr, std::vector<unsigned> lcore_ids) {
  config::Config c;
  config::Port p;
  p.name = "uplink";
  p.device = "net_null0";
  p.ipv4 = {addr, 23};
  c.ports = {p};
  for (unsigned id : lcore_ids) c.lcores.push_back({id, {}});
  c.racks = {{"rack-a", 0xc6121401, 0}, {"rack-b", 0xc6121501, 0}};
  c.rack = rack;
  config::Job j;
  j.id = 7;
  j.name = "bert";
  j.mode = config::JobMode::ps;
  j.optimizer.kind = config::OptimizerKind::adam;
  j.dtype = Dtype::bf16;
  j.workers = 4;
  j.port_base = 42000;
  j.secret = "s";
  j.keys = {{"w", 100000}, {"b", 1000}};
  j.ranks_by_rack = {{"rack-a", {0, 1}}, {"rack-b", {2, 3}}};
  c.jobs = {j};
  return c;
}

HubFingerprint fingerprint(const config::Config& c) {
  auto plan = plan_job(c.jobs[0], static_cast<uint16_t>(c.lcores.size()), c.ports[0].mtu,
                       agg::kernels_for(agg::Isa::scalar));
  EXPECT_TRUE(plan.has_value()) << plan.error();
  return hub_fingerprint(c, *plan);
}

TEST(HubFingerprint, HubsOfOneDeploymentAgree) {
  auto a = hub("rack-a", 0xc6121401, {1, 2});
  auto b = hub("rack-b", 0xc6121501, {3, 5});  // other rack, address, lcore ids
  b.jobs[0].quota_bytes = 1 << 30;            // and limits
  b.jobs[0].rate_limit_pps = 1000;
  b.jobs[0].allowed_sources = {{0xc6121500, 24}};
  b.jobs[0].name = "bert-on-b";
  b.jobs[0].ranks_by_rack = {{"rack-a", {1, 0}}, {"rack-b", {3, 2}}};  // the same ranks, listed otherwise
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_TRUE(fingerprint_differences(fingerprint(a), fingerprint(b)).empty());
}

TEST(HubFingerprint, TheSecretIsNotInIt) {
  auto a = hub("rack-a", 0xc6121401, {1, 2});
  auto b = a;
  b.jobs[0].secret = "another";
  EXPECT_EQ(fingerprint(a), fingerprint(b));
}

TEST(HubFingerprint, HubPortBaseZeroMeansTheJobsPortBase) {
  auto a = hub("rack-a", 0xc6121401, {1, 2});
  auto b = a;
  b.racks[1].hub_port_base = 42000;
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  b.racks[1].hub_port_base = 43000;
  EXPECT_NE(fingerprint(a).parts[HubFingerprint::racks], fingerprint(b).parts[HubFingerprint::racks]);
}

struct Change {
  const char* what;
  HubFingerprint::Component component;
  std::function<void(config::Config&)> apply;
};

TEST(HubFingerprint, EachSharedFieldChangesOnlyItsComponent) {
  const std::vector<Change> changes = {
      {"rack name", HubFingerprint::racks, [](auto& c) { c.racks[1].name = "rack-c"; c.jobs[0].ranks_by_rack[1].first = "rack-c"; }},
      {"hub address", HubFingerprint::racks, [](auto& c) { c.racks[1].hub_ipv4 += 1; }},
      {"rank moved", HubFingerprint::ranks,
       [](auto& c) { c.jobs[0].ranks_by_rack = {{"rack-a", {0}}, {"rack-b", {1, 2, 3}}}; }},
      {"job id", HubFingerprint::layout, [](auto& c) { c.jobs[0].id = 8; }},
      {"key size", HubFingerprint::layout, [](auto& c) { c.jobs[0].keys[1].elems = 1001; }},
      {"chunk_bytes", HubFingerprint::layout, [](auto& c) { c.jobs[0].chunk_bytes = 65536; }},
      {"lcore count", HubFingerprint::layout, [](auto& c) { c.lcores.push_back({4, {}}); }},
      {"mtu", HubFingerprint::layout, [](auto& c) { c.ports[0].mtu = 9000; }},
      {"dtype", HubFingerprint::layout, [](auto& c) { c.jobs[0].dtype = Dtype::fp16; }},
      {"deterministic", HubFingerprint::arithmetic, [](auto& c) { c.jobs[0].deterministic = true; }},
      {"round_modulus", HubFingerprint::arithmetic, [](auto& c) { c.jobs[0].round_modulus = 4; }},
      {"lr", HubFingerprint::optimizer, [](auto& c) { c.jobs[0].optimizer.lr = 0.02f; }},
      {"adamw", HubFingerprint::optimizer, [](auto& c) { c.jobs[0].optimizer.adamw = true; }},
      {"eps", HubFingerprint::optimizer, [](auto& c) { c.jobs[0].optimizer.eps = 1e-7f; }},
  };
  const auto base = hub("rack-a", 0xc6121401, {1, 2});
  const HubFingerprint mine = fingerprint(base);
  for (const Change& ch : changes) {
    auto other = base;
    ch.apply(other);
    const HubFingerprint theirs = fingerprint(other);
    for (size_t i = 0; i < HubFingerprint::kComponents; ++i) {
      EXPECT_EQ(mine.parts[i] != theirs.parts[i], i == ch.component) << ch.what << ", component " << i;
    }
    const auto diffs = fingerprint_differences(mine, theirs);
    ASSERT_EQ(diffs.size(), 1u) << ch.what;
    EXPECT_EQ(diffs[0], std::string(fingerprint_component_name(ch.component)) + " differs") << ch.what;
  }
}

// Rack indexes follow the order of racks: reordered, the racks and the ranks under each index differ.
TEST(HubFingerprint, RackOrderChangesRacksAndRanks) {
  const auto base = hub("rack-a", 0xc6121401, {1, 2});
  auto other = base;
  std::swap(other.racks[0], other.racks[1]);
  const auto diffs = fingerprint_differences(fingerprint(base), fingerprint(other));
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0], std::string(fingerprint_component_name(HubFingerprint::racks)) + " differs");
  EXPECT_EQ(diffs[1], "ranks_by_rack differs");
}

TEST(HubFingerprint, ModeChangesArithmeticAndOptimizer) {
  const auto base = hub("rack-a", 0xc6121401, {1, 2});
  auto other = base;
  other.jobs[0].mode = config::JobMode::allreduce;
  const auto diffs = fingerprint_differences(fingerprint(base), fingerprint(other));
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_NE(diffs[0].find("arithmetic"), std::string::npos);
  EXPECT_NE(diffs[1].find("optimizer"), std::string::npos);
}

// An allreduce job runs no optimizer: its settings are not something the hubs must agree on.
TEST(HubFingerprint, AnAllreduceJobIgnoresOptimizerSettings) {
  auto a = hub("rack-a", 0xc6121401, {1, 2});
  a.jobs[0].mode = config::JobMode::allreduce;
  auto b = a;
  b.jobs[0].optimizer.lr = 0.5f;
  EXPECT_EQ(fingerprint(a), fingerprint(b));
}

JobPlan plan_of(const config::Config& c) {
  auto plan = plan_job(c.jobs[0], static_cast<uint16_t>(c.lcores.size()), c.ports[0].mtu,
                       agg::kernels_for(agg::Isa::scalar));
  EXPECT_TRUE(plan.has_value()) << plan.error();
  return *plan;
}

TEST(HubPlan, ATwoRackJobSeenFromEachHub) {
  for (const auto& [rack, self, local] : {std::tuple{"rack-a", 0, std::vector<uint16_t>{0, 1}},
                                          std::tuple{"rack-b", 1, std::vector<uint16_t>{2, 3}}}) {
    auto c = hub(rack, self == 0 ? 0xc6121401 : 0xc6121501, {1, 2});
    if (self == 0) c.racks[1].hub_port_base = 43000;  // the other hub's port base may differ
    const JobPlan plan = plan_of(c);
    auto h = plan_hierarchy(c, plan, 1500);
    ASSERT_TRUE(h.has_value()) << h.error();
    EXPECT_EQ(h->my_rack, self);
    EXPECT_EQ(h->local_ranks, local);
    EXPECT_EQ(h->rack_of_rank, (std::vector<uint16_t>{0, 0, 1, 1}));
    ASSERT_EQ(h->hubs.size(), 2u);
    EXPECT_EQ(h->hubs[0].ipv4, 0xc6121401u);
    EXPECT_EQ(h->hubs[0].port_base, 42000u);  // hub_port_base 0: the job's
    EXPECT_EQ(h->hubs[1].port_base, self == 0 ? 43000u : 42000u);
    // bf16 at MTU 1500: segments of 704 elements travel as fp32 partials in two pieces of 352.
    EXPECT_EQ(plan.math.segment_elems, 704u);
    EXPECT_EQ(h->piece_elems, 352u);
    EXPECT_EQ(h->pieces_per_segment, 2u);
    EXPECT_EQ(h->payload_key, proto::fwd_payload_key(proto::derive_key("s", c.jobs[0].id)));
    EXPECT_EQ(h->fingerprint, hub_fingerprint(c, plan));
    auto homes = proto::HomeMap::build(plan.layout, 2);
    ASSERT_TRUE(homes.has_value());
    for (uint32_t chunk = 0; chunk < plan.layout.chunk_count(); ++chunk) EXPECT_EQ(h->homes.home(chunk), homes->home(chunk));
    EXPECT_FALSE(h->homes.homed(0).empty());
    EXPECT_FALSE(h->homes.homed(1).empty());
  }
}

TEST(HubPlan, AHubMustReceiveForwardsOnTheJobsPortsAndReachEveryPeer) {
  auto c = hub("rack-b", 0xc6121501, {1});
  c.racks[1].hub_port_base = 43000;  // its own rack: forwards would come where the job does not listen
  auto h = plan_hierarchy(c, plan_of(c), 1500);
  ASSERT_FALSE(h.has_value());
  EXPECT_NE(h.error().find("racks[2].hub_port_base"), std::string::npos) << h.error();
  c.racks[1].hub_port_base = 0;
  c.racks[0].hub_ipv4 = 0x0a000001;  // no port's subnet holds rack-a's hub
  h = plan_hierarchy(c, plan_of(c), 1500);
  ASSERT_FALSE(h.has_value());
  EXPECT_NE(h.error().find("racks[1].hub_ipv4"), std::string::npos) << h.error();
  c.racks[0].hub_ipv4 = 0xc6121401;
  c.jobs[0].ranks_by_rack = {{"rack-a", {0, 1, 2, 3}}};  // rack-b holds none
  h = plan_hierarchy(c, plan_of(c), 1500);
  ASSERT_FALSE(h.has_value());
  EXPECT_NE(h.error().find("holds none"), std::string::npos) << h.error();
}

TEST(HubPlan, AnFp32JobForwardsOnePiecePerSegment) {
  auto c = hub("rack-a", 0xc6121401, {1});
  c.jobs[0].dtype = Dtype::fp32;
  auto h = plan_hierarchy(c, plan_of(c), 1500);
  ASSERT_TRUE(h.has_value()) << h.error();
  EXPECT_EQ(h->pieces_per_segment, 1u);
  EXPECT_EQ(h->piece_elems, 352u);
}

TEST(HubPlan, AJobWithoutASecretOrShardedIsRefused) {
  auto c = hub("rack-a", 0xc6121401, {1});
  c.jobs[0].secret.clear();
  auto h = plan_hierarchy(c, plan_of(c), 1500);
  ASSERT_FALSE(h.has_value());
  EXPECT_NE(h.error().find("secret: required when racks are set"), std::string::npos) << h.error();

  auto s = hub("rack-a", 0xc6121401, {1});
  s.jobs[0].shard_count = 2;
  auto g = plan_hierarchy(s, plan_of(s), 1500);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().find("both sharded and spread over racks"), std::string::npos) << g.error();
}

TEST(HubPlan, ARankInNoRackIsRefused) {
  auto c = hub("rack-a", 0xc6121401, {1});
  c.jobs[0].ranks_by_rack[1].second = {2};  // rank 3 nowhere (validation would have said so already)
  auto h = plan_hierarchy(c, plan_of(c), 1500);
  ASSERT_FALSE(h.has_value());
  EXPECT_NE(h.error().find("rank 3 is in no rack"), std::string::npos) << h.error();
}

}  // namespace
}  // namespace phub::engine

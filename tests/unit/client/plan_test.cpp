// The client's chunk plan: the same chunks as lib/proto's Layout, segments that tile every chunk, buffer
// offsets, and the mapping of owners onto servers x lcores for a sharded job.
#include <gtest/gtest.h>

#include "phub/client/plan.hpp"
#include "phub/proto/frame.hpp"

namespace phub::client {
namespace {

Options opts(std::vector<uint32_t> servers, uint16_t lcores, Dtype d = Dtype::fp32) {
  Options o;
  o.servers = std::move(servers);
  o.server_lcores = lcores;
  o.port_base = 40000;
  o.job_id = 1;
  o.workers = 2;
  o.dtype = d;
  return o;
}

TEST(ClientPlan, MatchesTheProtocolLayout) {
  const std::vector<uint64_t> keys{100000, 1, 8192, 8193};
  auto plan = Plan::build(opts({1}, 2), keys);
  ASSERT_TRUE(plan);
  proto::LayoutParams lp;
  lp.key_elems = keys;
  lp.chunk_elems = 32768 / 4;
  lp.owners = 2;
  lp.segment_elems = proto::segment_elems(1500, Dtype::fp32);
  auto ref = proto::Layout::build(lp);
  ASSERT_TRUE(ref);
  ASSERT_EQ(plan->chunk_count(), ref->chunk_count());
  for (uint32_t c = 0; c < ref->chunk_count(); ++c) {
    EXPECT_EQ(plan->layout().chunk(c).owner, ref->chunk(c).owner);
    EXPECT_EQ(plan->layout().chunk(c).elems, ref->chunk(c).elems);
    EXPECT_EQ(plan->endpoint(c).port, 40000 + ref->chunk(c).owner);
  }
}

// Segments tile each chunk exactly, and buffer offsets cover each key exactly once.
TEST(ClientPlan, SegmentsTileEveryKey) {
  for (Dtype d : {Dtype::fp32, Dtype::bf16}) {
    const std::vector<uint64_t> keys{352 * 3, 351, 8192 * 2 + 17, 1};
    auto plan = Plan::build(opts({1}, 3, d), keys);
    ASSERT_TRUE(plan);
    EXPECT_EQ(plan->segment_elems(), d == Dtype::fp32 ? 352u : 704u);
    std::vector<std::vector<int>> covered(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) covered[k].assign(keys[k], 0);
    uint64_t segs = 0;
    for (uint32_t c = 0; c < plan->chunk_count(); ++c) {
      const auto& ci = plan->layout().chunk(c);
      EXPECT_EQ(plan->first_segment(c), segs);
      uint32_t elems = 0;
      for (uint32_t s = 0; s < plan->segments(c); ++s) {
        const uint32_t n = plan->segment_len(c, s);
        ASSERT_GT(n, 0u);
        if (s + 1 < plan->segments(c)) {
          EXPECT_EQ(n, plan->segment_elems());
        }
        const size_t first = plan->key_byte_offset(c, s) / plan->elem_bytes();
        for (uint32_t i = 0; i < n; ++i) ++covered[ci.key][first + i];
        elems += n;
      }
      EXPECT_EQ(elems, ci.elems);
      segs += plan->segments(c);
    }
    EXPECT_EQ(plan->total_segments(), segs);
    for (const auto& key : covered) {
      for (int hits : key) ASSERT_EQ(hits, 1);
    }
  }
}

TEST(ClientPlan, ShardsOwnersOverServersAndLcores) {
  const std::vector<uint32_t> servers{0x0A000001, 0x0A000002};
  auto plan = Plan::build(opts(servers, 2), std::vector<uint64_t>(16, 8192));
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->owner_endpoints().size(), 4u);
  EXPECT_EQ(plan->owner_endpoints()[0], (Endpoint{servers[0], 40000}));
  EXPECT_EQ(plan->owner_endpoints()[1], (Endpoint{servers[0], 40001}));
  EXPECT_EQ(plan->owner_endpoints()[2], (Endpoint{servers[1], 40000}));
  EXPECT_EQ(plan->owner_endpoints()[3], (Endpoint{servers[1], 40001}));
  std::vector<int> per_owner(4, 0);
  for (uint32_t c = 0; c < plan->chunk_count(); ++c) ++per_owner[plan->layout().chunk(c).owner];
  EXPECT_EQ(per_owner, (std::vector<int>{4, 4, 4, 4}));  // equal chunks balance exactly
  EXPECT_EQ(plan->owner_of(Endpoint{servers[1], 40001}), 3);
  EXPECT_EQ(plan->owner_of(Endpoint{servers[1], 40002}), 4);  // none
}

TEST(ClientPlan, RefusesNoKeys) {
  auto plan = Plan::build(opts({1}, 1), {});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, PHUB_ERR_STATE);
}

}  // namespace
}  // namespace phub::client

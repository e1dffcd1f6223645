// Tests of the chunk map: chunking, greedy byte balance, segments, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "phub/proto/layout.hpp"

namespace phub::proto {
namespace {

TEST(Layout, ChunksCoverEveryKeyExactlyOnce) {
  LayoutParams p{{10000, 8192, 1, 30000}, 8192, 3, 352};
  auto l = Layout::build(p);
  ASSERT_TRUE(l.has_value()) << l.error();
  EXPECT_EQ(l->chunk_count(), 2u + 1u + 1u + 4u);
  for (uint32_t k = 0; k < p.key_elems.size(); ++k) {
    uint64_t covered = 0;
    for (uint32_t c = l->first_chunk(k); c < l->first_chunk(k) + l->key_chunk_count(k); ++c) {
      EXPECT_EQ(l->chunk(c).key, k);
      EXPECT_EQ(l->chunk(c).key_offset, covered);
      covered += l->chunk(c).elems;
    }
    EXPECT_EQ(covered, p.key_elems[k]);
  }
  EXPECT_EQ(l->total_elems(), 10000u + 8192 + 1 + 30000);
}

TEST(Layout, GreedyBalanceIsWithinOneChunk) {
  for (uint16_t owners = 1; owners <= 8; ++owners) {
    LayoutParams p{{1000003, 77777, 5, 262144, 999}, 8192, owners, 352};
    auto l = Layout::build(p);
    ASSERT_TRUE(l.has_value());
    uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
    for (uint16_t o = 0; o < owners; ++o) {
      lo = std::min(lo, l->owner_elems(o));
      hi = std::max(hi, l->owner_elems(o));
      sum += l->owner_elems(o);
      uint32_t expect_local = 0;
      for (uint32_t id : l->owned(o)) {
        EXPECT_EQ(l->chunk(id).owner, o);
        EXPECT_EQ(l->chunk(id).local_index, expect_local++);
      }
    }
    EXPECT_EQ(sum, l->total_elems());
    EXPECT_LE(hi - lo, p.chunk_elems) << owners << " owners";
  }
}

TEST(Layout, SegmentsTileEachChunk) {
  LayoutParams p{{8192 + 100}, 8192, 2, 352};
  auto l = Layout::build(p);
  ASSERT_TRUE(l.has_value());
  for (const auto& c : l->chunks()) {
    uint32_t covered = 0;
    for (uint32_t s = 0; s < c.segments; ++s) {
      EXPECT_EQ(l->segment_offset(s), covered);
      const uint32_t n = l->segment_count_elems(c, s);
      EXPECT_GT(n, 0u);
      covered += n;
    }
    EXPECT_EQ(covered, c.elems);
    EXPECT_EQ(l->segment_count_elems(c, c.segments), 0u);
  }
  EXPECT_EQ(l->chunk(0).segments, 24u);  // 8192 = 23 * 352 + 96
  EXPECT_EQ(l->chunk(1).segments, 1u);
}

TEST(Layout, SameInputsSameMap) {
  LayoutParams p{{123456, 654321}, 4096, 4, 704};
  auto a = Layout::build(p);
  auto b = Layout::build(p);
  ASSERT_TRUE(a && b);
  for (uint32_t i = 0; i < a->chunk_count(); ++i) EXPECT_EQ(a->chunk(i).owner, b->chunk(i).owner);
}

TEST(Layout, RejectsEmptyOrZeroInputs) {
  EXPECT_FALSE(Layout::build({{}, 8192, 1, 352}).has_value());
  EXPECT_FALSE(Layout::build({{10, 0}, 8192, 1, 352}).has_value());
  EXPECT_FALSE(Layout::build({{10}, 0, 1, 352}).has_value());
  EXPECT_FALSE(Layout::build({{10}, 8192, 0, 352}).has_value());
  EXPECT_FALSE(Layout::build({{10}, 8192, 1, 0}).has_value());
}

}  // namespace
}  // namespace phub::proto

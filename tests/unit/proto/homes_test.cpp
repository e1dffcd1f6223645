// Tests of the home map: every chunk one home, byte balance per lcore and per hub, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "phub/proto/homes.hpp"

namespace phub::proto {
namespace {

Layout layout(std::vector<uint64_t> keys, uint32_t chunk_elems, uint16_t owners) {
  auto l = Layout::build(LayoutParams{std::move(keys), chunk_elems, owners, 352});
  EXPECT_TRUE(l.has_value());
  return *l;
}

TEST(HomeMap, RefusesNoHubs) {
  const Layout l = layout({1000}, 256, 1);
  auto h = HomeMap::build(l, 0);
  ASSERT_FALSE(h.has_value());
  EXPECT_NE(h.error().find("no hubs"), std::string::npos);
}

TEST(HomeMap, OneHubHomesEverything) {
  const Layout l = layout({100000, 7}, 8192, 3);
  auto h = HomeMap::build(l, 1);
  ASSERT_TRUE(h.has_value());
  for (uint32_t c = 0; c < l.chunk_count(); ++c) EXPECT_EQ(h->home(c), 0u);
  EXPECT_EQ(h->homed(0).size(), l.chunk_count());
  EXPECT_EQ(h->hub_elems(0), l.total_elems());
}

// Worked by hand: one lcore, chunks of 8192, 8192, 8192, 1000 elements (ids 0..3) over two hubs. Largest
// first by id: 0 -> hub 0, 1 -> hub 1 (less loaded), 2 -> hub 0 (tie: lowest), 3 -> hub 1.
TEST(HomeMap, GreedyByBytesLargestFirstLowestHubOnTies) {
  const Layout l = layout({3 * 8192 + 1000}, 8192, 1);
  auto h = HomeMap::build(l, 2);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->home(0), 0u);
  EXPECT_EQ(h->home(1), 1u);
  EXPECT_EQ(h->home(2), 0u);
  EXPECT_EQ(h->home(3), 1u);
  EXPECT_EQ(h->hub_elems(0), 2u * 8192);
  EXPECT_EQ(h->hub_elems(1), 8192u + 1000);
}

// A short chunk with a low id still goes after the full ones: chunks 0 (100 elements, key 0) and 1, 2
// (8192 each, key 1) on one lcore over two hubs: 1 -> hub 0, 2 -> hub 1, 0 -> hub 0.
TEST(HomeMap, ShortChunksAreHomedLast) {
  const Layout l = layout({100, 2 * 8192}, 8192, 1);
  auto h = HomeMap::build(l, 2);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->home(1), 0u);
  EXPECT_EQ(h->home(2), 1u);
  EXPECT_EQ(h->home(0), 0u);
}

TEST(HomeMap, EveryChunkHasOneHomeAndBalanceIsWithinOneChunkPerLcore) {
  for (uint16_t owners = 1; owners <= 4; ++owners) {
    for (uint16_t hubs = 1; hubs <= 5; ++hubs) {
      const Layout l = layout({1000003, 77777, 5, 262144, 999}, 8192, owners);
      auto h = HomeMap::build(l, hubs);
      ASSERT_TRUE(h.has_value());
      std::set<uint32_t> seen;
      uint64_t total = 0;
      for (uint16_t hub = 0; hub < hubs; ++hub) {
        for (uint32_t c : h->homed(hub)) {
          EXPECT_EQ(h->home(c), hub);
          EXPECT_TRUE(seen.insert(c).second) << "chunk " << c << " homed twice";
        }
        total += h->hub_elems(hub);
      }
      EXPECT_EQ(seen.size(), l.chunk_count());
      EXPECT_EQ(total, l.total_elems());
      uint64_t lo_total = UINT64_MAX, hi_total = 0;
      for (uint16_t hub = 0; hub < hubs; ++hub) {
        lo_total = std::min(lo_total, h->hub_elems(hub));
        hi_total = std::max(hi_total, h->hub_elems(hub));
      }
      for (uint16_t o = 0; o < owners; ++o) {
        uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
        for (uint16_t hub = 0; hub < hubs; ++hub) {
          lo = std::min(lo, h->hub_owner_elems(hub, o));
          hi = std::max(hi, h->hub_owner_elems(hub, o));
          sum += h->hub_owner_elems(hub, o);
        }
        EXPECT_EQ(sum, l.owner_elems(o));
        EXPECT_LE(hi - lo, 8192u) << owners << " lcores, " << hubs << " hubs, lcore " << o;
      }
      EXPECT_LE(hi_total - lo_total, 8192u * owners) << owners << " lcores, " << hubs << " hubs";
    }
  }
}

TEST(HomeMap, SameInputsSameMap) {
  const Layout a = layout({500000, 3333, 65536}, 4096, 3);
  const Layout b = layout({500000, 3333, 65536}, 4096, 3);
  auto ha = HomeMap::build(a, 3);
  auto hb = HomeMap::build(b, 3);
  ASSERT_TRUE(ha.has_value() && hb.has_value());
  for (uint32_t c = 0; c < a.chunk_count(); ++c) ASSERT_EQ(ha->home(c), hb->home(c)) << c;
}

TEST(HomeMap, MoreHubsThanChunksLeavesSomeHubsEmpty) {
  const Layout l = layout({3 * 1024}, 1024, 1);
  auto h = HomeMap::build(l, 5);
  ASSERT_TRUE(h.has_value());
  for (uint16_t hub = 0; hub < 3; ++hub) EXPECT_EQ(h->homed(hub).size(), 1u);
  EXPECT_TRUE(h->homed(3).empty());
  EXPECT_TRUE(h->homed(4).empty());
}

}  // namespace
}  // namespace phub::proto

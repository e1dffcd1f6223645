// The chunk-to-interface map: each lcore's home port (one port: all there; lcores split per NIC: their NIC;
// lcores polling every port: spread over them), and the elements per port that follow a job's chunk split.
#include <gtest/gtest.h>

#include "phub/config/interface_map.hpp"
#include "phub/proto/layout.hpp"

namespace phub::config {
namespace {

Config ports_and_lcores(size_t ports, std::vector<std::vector<std::string>> polls) {
  Config c;
  for (size_t p = 0; p < ports; ++p) {
    Port port;
    port.name = "p" + std::to_string(p);
    port.device = "0000:3b:00." + std::to_string(p);
    port.ipv4 = Ipv4Prefix{0xC6120001u + static_cast<uint32_t>(p << 8), 24};  // 198.18.p.1/24
    c.ports.push_back(port);
  }
  for (size_t i = 0; i < polls.size(); ++i) c.lcores.push_back({static_cast<unsigned>(i + 1), polls[i]});
  return c;
}

InterfaceMap map_of(const Config& c) { return interface_map(c, queue_map(c)); }

TEST(InterfaceMap, OnePortHomesEveryLcoreThere) {
  EXPECT_EQ(map_of(ports_and_lcores(1, {{}, {}, {}})).home_port, (std::vector<uint16_t>{0, 0, 0}));
}

TEST(InterfaceMap, LcoresSplitPerNicAreHomedOnTheirNic) {
  const Config c = ports_and_lcores(2, {{"p0"}, {"p0"}, {"p1"}, {"p1"}});
  const InterfaceMap m = map_of(c);
  EXPECT_EQ(m.home_port, (std::vector<uint16_t>{0, 0, 1, 1}));
  EXPECT_EQ(m.describe(c), "lcore 1 -> p0 (198.18.0.1), lcore 2 -> p0 (198.18.0.1), lcore 3 -> p1 (198.18.1.1), "
                           "lcore 4 -> p1 (198.18.1.1)");
}

TEST(InterfaceMap, LcoresPollingEveryPortAreSpreadOverThem) {
  EXPECT_EQ(map_of(ports_and_lcores(2, {{}, {}, {}, {}})).home_port, (std::vector<uint16_t>{0, 1, 0, 1}));
  EXPECT_EQ(map_of(ports_and_lcores(3, {{}, {}})).home_port, (std::vector<uint16_t>{0, 1}));
  // Lcore 1 polls both; lcore 2 only p0: it goes there although lcore 1 took p0 first; lcore 3 polls both and
  // takes p1, which has fewer.
  EXPECT_EQ(map_of(ports_and_lcores(2, {{"p0", "p1"}, {"p0"}, {"p1", "p0"}})).home_port,
            (std::vector<uint16_t>{0, 0, 1}));
  // Every lcore is homed on a port it polls.
  const Config c = ports_and_lcores(3, {{"p2"}, {"p1", "p2"}, {}, {"p0"}, {"p2", "p0"}});
  const QueueMap q = queue_map(c);
  const InterfaceMap m = interface_map(c, q);
  for (size_t l = 0; l < c.lcores.size(); ++l) EXPECT_TRUE(q.queue_of(static_cast<uint16_t>(l), m.home_port[l])) << l;
}

TEST(InterfaceMap, BytesPerPortFollowTheChunkSplit) {
  // A job of two keys over 3 lcores, lcores 1-2 on p0 and lcore 3 on p1: each port gets what its lcores own.
  const Config c = ports_and_lcores(2, {{"p0"}, {"p0"}, {"p1"}});
  const InterfaceMap m = map_of(c);
  proto::LayoutParams lp;
  lp.key_elems = {60000, 5000, 123457};
  lp.owners = 3;
  auto layout = proto::Layout::build(lp);
  ASSERT_TRUE(layout);
  std::vector<uint64_t> per_lcore;
  for (uint16_t o = 0; o < 3; ++o) per_lcore.push_back(layout->owner_elems(o));
  const auto per_port = m.per_port(per_lcore, 2);
  ASSERT_EQ(per_port.size(), 2u);
  EXPECT_EQ(per_port[0], per_lcore[0] + per_lcore[1]);
  EXPECT_EQ(per_port[1], per_lcore[2]);
  EXPECT_EQ(per_port[0] + per_port[1], layout->total_elems());
  // Chunk by chunk: the owner's home port.
  std::vector<uint64_t> by_chunk(2, 0);
  for (const auto& ch : layout->chunks()) by_chunk[m.home_port[ch.owner]] += ch.elems;
  EXPECT_EQ(by_chunk, per_port);
}

}  // namespace
}  // namespace phub::config

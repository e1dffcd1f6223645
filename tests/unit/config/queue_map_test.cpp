// The (port, queue) -> lcore map: one RX queue per polling lcore, in lcore order; a PMD's fixed queues
// (net_af_packet's qpairs) dealt to its pollers in turn; one TX queue per lcore on every port; where a flow
// rule sends an lcore's UDP port.
#include <gtest/gtest.h>

#include "phub/config/queue_map.hpp"

namespace phub::config {
namespace {

Config two_ports(const std::string& dev0, const std::string& dev1, std::vector<std::vector<std::string>> polls) {
  Config c;
  Port p0, p1;
  p0.name = "nic0";
  p0.device = dev0;
  p1.name = "nic1";
  p1.device = dev1;
  c.ports = {p0, p1};
  for (size_t i = 0; i < polls.size(); ++i) c.lcores.push_back({static_cast<unsigned>(i + 1), polls[i]});
  return c;
}

using Q = RxQueue;

TEST(QueueMap, EveryLcorePollsEveryPortByDefault) {
  const QueueMap m = queue_map(two_ports("0000:3b:00.0", "0000:af:00.0", {{}, {}, {}}));
  EXPECT_EQ(m.tx_queues, 3);
  for (uint16_t p = 0; p < 2; ++p) {
    EXPECT_EQ(m.rx_queues(p), 3);
    EXPECT_EQ(m.rx_owner[p], (std::vector<uint16_t>{0, 1, 2}));
  }
  EXPECT_EQ(m.by_lcore[1], (std::vector<Q>{{0, 1}, {1, 1}}));
  EXPECT_EQ(m.steer_queue(2, 1), 2);
  EXPECT_EQ(describe_rx_queues(two_ports("a", "b", {{}, {}}), m.by_lcore[1]), "nic0/q1 nic1/q1");
}

TEST(QueueMap, LcoresSplitPerNicOwnQueueZeroOfTheirs) {
  // The NUMA-local layout: lcores 1-2 serve nic0, lcores 3-4 nic1. Each port has as many RX queues as
  // lcores poll it; every lcore still has a TX queue on both.
  const QueueMap m = queue_map(two_ports("0000:3b:00.0", "0000:af:00.0", {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}));
  EXPECT_EQ(m.rx_queues(0), 2);
  EXPECT_EQ(m.rx_queues(1), 2);
  EXPECT_EQ(m.tx_queues, 4);
  EXPECT_EQ(m.rx_owner[1], (std::vector<uint16_t>{2, 3}));
  EXPECT_EQ(m.by_lcore[0], (std::vector<Q>{{0, 0}}));
  EXPECT_EQ(m.by_lcore[3], (std::vector<Q>{{1, 1}}));
  EXPECT_EQ(m.queue_of(2, 1), std::optional<uint16_t>(0));
  EXPECT_EQ(m.queue_of(2, 0), std::nullopt);
  // A rule for lcore 3's UDP port on nic1 goes to its queue; on nic0, which it does not poll, to queue
  // 3 % 2 = 1 there (lcore index 1 polls it), which hands the frames over.
  EXPECT_EQ(m.steer_queue(3, 1), 1);
  EXPECT_EQ(m.steer_queue(3, 0), 1);
  EXPECT_EQ(m.steer_queue(2, 0), 0);
  const Config c = two_ports("0000:3b:00.0", "0000:af:00.0", {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}});
  EXPECT_EQ(m.describe_port(c, 1), "port nic1: rx q0 lcore 3, q1 lcore 4; tx one queue per lcore (4)");
}

TEST(QueueMap, AfPacketQueuesAreAllPolledDealtInTurn) {
  // af_packet's kernel fan-out feeds every one of its qpairs sockets: all are polled, even by one lcore.
  const QueueMap m = queue_map(two_ports("net_af_packet0,iface=v0,qpairs=2", "net_af_packet1,qpairs=4,iface=v1",
                                         {{"nic0"}, {"nic1"}, {"nic1"}}));
  EXPECT_EQ(m.rx_queues(0), 2);
  EXPECT_EQ(m.rx_owner[0], (std::vector<uint16_t>{0, 0}));
  EXPECT_EQ(m.rx_queues(1), 4);
  EXPECT_EQ(m.rx_owner[1], (std::vector<uint16_t>{1, 2, 1, 2}));
  EXPECT_EQ(m.by_lcore[0], (std::vector<Q>{{0, 0}, {0, 1}}));
  EXPECT_EQ(m.by_lcore[2], (std::vector<Q>{{1, 1}, {1, 3}}));
}

TEST(QueueMap, FixedQueuesComeFromAfPacketDevargsOnly) {
  EXPECT_EQ(fixed_rx_queues("net_af_packet0,iface=eth0"), std::optional<uint16_t>(1));
  EXPECT_EQ(fixed_rx_queues("net_af_packet0"), std::optional<uint16_t>(1));
  EXPECT_EQ(fixed_rx_queues("net_af_packet3,iface=eth0,qpairs=8,framecnt=4096"), std::optional<uint16_t>(8));
  EXPECT_EQ(fixed_rx_queues("net_af_packet3,qpairs=x"), std::optional<uint16_t>(1));  // the PMD refuses it at probe
  EXPECT_EQ(fixed_rx_queues("net_memif0,role=server"), std::nullopt);
  EXPECT_EQ(fixed_rx_queues("0000:3b:00.0"), std::nullopt);
  EXPECT_EQ(fixed_rx_queues("net_tap0,iface=qpairs=3"), std::nullopt);
}

}  // namespace
}  // namespace phub::config

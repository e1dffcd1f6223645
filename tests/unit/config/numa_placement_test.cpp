// NUMA placement on one-, two- and four-socket shapes: RX pools on their port's socket (or their pollers'
// where the port's is unknown), per-lcore state on the lcore's, one transmit pool set per lcore socket, and
// an lcore polling a port of another socket refused unless it says cross_socket = true.
#include <gtest/gtest.h>

#include "phub/config/numa_placement.hpp"

namespace phub::config {
namespace {

struct Shape {
  Config cfg;
  std::vector<int> lcore_sockets, port_sockets;

  // `devices` one per port (named nic0, nic1, ...); `polls` one per lcore (ids 1, 2, ...): the ports it names.
  Shape(const std::vector<std::string>& devices, std::vector<int> port_socket,
        const std::vector<std::vector<std::string>>& polls, std::vector<int> lcore_socket)
      : lcore_sockets(std::move(lcore_socket)), port_sockets(std::move(port_socket)) {
    for (size_t p = 0; p < devices.size(); ++p) {
      Port port;
      port.name = "nic" + std::to_string(p);
      port.device = devices[p];
      cfg.ports.push_back(port);
    }
    for (size_t i = 0; i < polls.size(); ++i) cfg.lcores.push_back({static_cast<unsigned>(i + 1), polls[i]});
  }
  [[nodiscard]] Expected<Placement, std::string> place() const {
    return place_memory(cfg, queue_map(cfg), lcore_sockets, port_sockets);
  }
};

const std::string kPci0 = "0000:3b:00.0", kPci1 = "0000:af:00.0";

TEST(NumaPlacement, OneSocketKeepsEverythingOnIt) {
  // Today's shape: virtual devices (no socket known) and every lcore on socket 0, polling every port.
  const Shape s({"net_ring0", "net_af_packet0,iface=v0,qpairs=2"}, {kAnySocket, kAnySocket}, {{}, {}}, {0, 0});
  const auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0, 0}));
  EXPECT_EQ(pl->lcore_socket, (std::vector<int>{0, 0}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{0}));
  EXPECT_EQ(pl->tx_pool_set, (std::vector<uint16_t>{0, 0}));
  EXPECT_EQ(pl->describe(s.cfg), (std::vector<std::string>{
                                     "memory: port nic0 rx pool on socket 0",
                                     "memory: port nic1 rx pool on socket 0",
                                     "memory: lcore state 1 on socket 0, 2 on socket 0; transmit pools on socket 0",
                                 }));
}

TEST(NumaPlacement, TwoSocketsWithLcoresSplitPerNicStayLocal) {
  const Shape s({kPci0, kPci1}, {0, 1}, {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}, {0, 0, 1, 1});
  const auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0, 1}));
  EXPECT_EQ(pl->lcore_socket, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{0, 1}));
  EXPECT_EQ(pl->tx_pool_set, (std::vector<uint16_t>{0, 0, 1, 1}));
  EXPECT_EQ(pl->describe(s.cfg).back(),
            "memory: lcore state 1 on socket 0, 2 on socket 0, 3 on socket 1, 4 on socket 1; transmit pools on "
            "socket 0, socket 1");
}

TEST(NumaPlacement, CrossSocketPollIsRefusedNamingBothSockets) {
  // Lcore 3 (socket 1) also polls nic0 (socket 0); lcore 1 (socket 0) polls both.
  const Shape s({kPci0, kPci1}, {0, 1}, {{}, {"nic0"}, {"nic1", "nic0"}}, {0, 0, 1});
  const auto pl = s.place();
  ASSERT_FALSE(pl.has_value());
  EXPECT_EQ(pl.error(),
            "lcores[1] (lcore 1) on socket 0 polls port nic1 on socket 1: its frames would cross sockets; poll "
            "ports of the lcore's own socket, or set cross_socket = true on lcores[1] to allow it\n"
            "lcores[3] (lcore 3) on socket 1 polls port nic0 on socket 0: its frames would cross sockets; poll "
            "ports of the lcore's own socket, or set cross_socket = true on lcores[3] to allow it");
}

TEST(NumaPlacement, CrossSocketTrueAllowsItAndPoolsStayOnTheirPorts) {
  Shape s({kPci0, kPci1}, {0, 1}, {{}, {"nic0"}, {"nic1", "nic0"}}, {0, 0, 1});
  s.cfg.lcores[2].cross_socket = true;
  auto pl = s.place();
  ASSERT_FALSE(pl.has_value());  // lcore 1 still polls nic1 without it
  EXPECT_EQ(pl.error().find("lcores[3]"), std::string::npos) << pl.error();
  EXPECT_NE(pl.error().find("lcores[1] (lcore 1) on socket 0 polls port nic1 on socket 1"), std::string::npos);

  s.cfg.lcores[0].cross_socket = true;
  pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  // The NIC writes into its own socket's pool whoever polls it; each lcore's state stays on its socket.
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0, 1}));
  EXPECT_EQ(pl->lcore_socket, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(pl->tx_pool_set, (std::vector<uint16_t>{0, 0, 1}));
}

TEST(NumaPlacement, AllLcoresOnAnotherSocketThanTheMainLcoreTakeTheirPoolsWithThem) {
  // Both NICs and every polling lcore on socket 1: nothing is left on socket 0, where the main lcore is.
  const Shape s({kPci0, kPci1}, {1, 1}, {{}, {}}, {1, 1});
  const auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{1, 1}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{1}));
}

TEST(NumaPlacement, FourSocketsOneNicEach) {
  std::vector<std::string> devices;
  std::vector<std::vector<std::string>> polls;
  std::vector<int> lcore_socket;
  for (int n = 0; n < 4; ++n) {
    devices.push_back("0000:" + std::to_string(10 + n) + ":00.0");
    for (int k = 0; k < 2; ++k) {
      polls.push_back({"nic" + std::to_string(n)});
      lcore_socket.push_back(n);
    }
  }
  Shape s(devices, {0, 1, 2, 3}, polls, lcore_socket);
  auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(pl->tx_pool_set, (std::vector<uint16_t>{0, 0, 1, 1, 2, 2, 3, 3}));

  // Lcore 6 (socket 2) polls nic3 (socket 3) as well: refused, naming sockets 2 and 3 only.
  s.cfg.lcores[5].ports.push_back("nic3");
  pl = s.place();
  ASSERT_FALSE(pl.has_value());
  EXPECT_EQ(pl.error().find('\n'), std::string::npos) << pl.error();
  EXPECT_NE(pl.error().find("lcores[6] (lcore 6) on socket 2 polls port nic3 on socket 3"), std::string::npos);
}

TEST(NumaPlacement, FourSocketsWithNicsOnTwoOfThem) {
  // NICs on sockets 0 and 2; lcores of sockets 1 and 3 poll them across, with cross_socket = true. The
  // pools stay on the NICs' sockets; transmit pools go to every socket with an lcore.
  Shape s({kPci0, kPci1}, {0, 2}, {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}, {0, 1, 2, 3});
  s.cfg.lcores[1].cross_socket = true;
  s.cfg.lcores[3].cross_socket = true;
  const auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0, 2}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(pl->tx_pool_set, (std::vector<uint16_t>{0, 1, 2, 3}));
}

TEST(NumaPlacement, UnknownPortSocketMatchesAnyLcoreAndGoesWhereItsQueuesArePolled) {
  // af_packet with qpairs=3 polled by lcores 1 (socket 1) and 2 (socket 0): queues 0 and 2 are lcore 1's,
  // so the pool goes to socket 1. Neither lcore is refused.
  const Shape s({"net_af_packet0,iface=v0,qpairs=3"}, {kAnySocket}, {{}, {}}, {1, 0});
  auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{1}));

  // One queue each: a tie, to the lower socket.
  const Shape tie({"net_tap0,iface=t0"}, {kAnySocket}, {{}, {}}, {1, 0});
  pl = tie.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0}));

  // A negative socket other than -1 is unknown too.
  const Shape odd({"net_tap0,iface=t0"}, {-7}, {{}}, {3});
  pl = odd.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{3}));
}

TEST(NumaPlacement, UnknownLcoreSocketMatchesAnyPortAndHasItsOwnTransmitPools) {
  // Lcore 2's CPUs span sockets (the EAL gives it no socket): it may poll nic1 on socket 1; its state and
  // transmit pools are "any", a set of their own.
  const Shape s({kPci0, kPci1}, {0, 1}, {{"nic0"}, {"nic1"}}, {0, kAnySocket});
  const auto pl = s.place();
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->lcore_socket, (std::vector<int>{0, kAnySocket}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{kAnySocket, 0}));
  EXPECT_EQ(pl->tx_pool_set, (std::vector<uint16_t>{1, 0}));
  EXPECT_EQ(pl->describe(s.cfg).back(),
            "memory: lcore state 1 on socket 0, 2 on socket any; transmit pools on socket any, socket 0");

  // A port nobody with a known socket polls: its pool is "any" as well.
  const Shape none({"net_ring0"}, {kAnySocket}, {{}}, {kAnySocket});
  const auto p2 = none.place();
  ASSERT_TRUE(p2.has_value()) << p2.error();
  EXPECT_EQ(p2->rx_pool_socket, (std::vector<int>{kAnySocket}));
  EXPECT_EQ(p2->describe(none.cfg).front(), "memory: port nic0 rx pool on socket any");
}

TEST(NumaPlacement, SocketListsThatDoNotFitTheConfigAreAnErrorNotACrash) {
  const Shape s({kPci0, kPci1}, {0}, {{}, {}}, {0, 0});
  const auto pl = s.place();
  ASSERT_FALSE(pl.has_value());
  EXPECT_EQ(pl.error(), "placement: 2 lcore and 1 port sockets given for a config of 2 lcores and 2 ports");
}

}  // namespace
}  // namespace phub::config

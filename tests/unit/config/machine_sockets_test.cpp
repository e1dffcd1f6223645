// The sockets of a config's lcores and ports before the EAL (phub/config/machine_sockets.hpp): from the EAL
// arguments' lcore map and what sysfs says, on one-, two- and four-node machines.
#include "phub/config/machine_sockets.hpp"

#include <gtest/gtest.h>

#include "phub/config/numa_placement.hpp"

namespace phub::config {
namespace {

// `ids` the lcores; ports by device.
Config shaped(const std::vector<unsigned>& ids, const std::vector<std::string>& devices) {
  Config cfg;
  for (const unsigned id : ids) cfg.lcores.push_back({id, {}});
  for (size_t p = 0; p < devices.size(); ++p) {
    Port port;
    port.name = "nic" + std::to_string(p);
    port.device = devices[p];
    cfg.ports.push_back(port);
  }
  return cfg;
}

// `nodes` CPUs each, node n holding CPUs n*cpus .. n*cpus + cpus - 1.
NumaFacts machine(int nodes, unsigned cpus) {
  NumaFacts f;
  for (int n = 0; n < nodes; ++n) {
    f.nodes.push_back(n);
    for (unsigned c = 0; c < cpus; ++c) f.node_cpus[n].push_back(static_cast<unsigned>(n) * cpus + c);
  }
  return f;
}

MachineSockets sockets(const Config& cfg, const std::vector<std::string>& eal, const NumaFacts& f) {
  auto s = machine_sockets(cfg, eal, f);
  if (!s) {
    ADD_FAILURE() << s.error();
    return {};
  }
  return *s;
}

TEST(MachineSockets, OneNodeGivesSocketZeroToEveryCpu) {
  const Config cfg = shaped({1, 2}, {"net_af_packet0,iface=phub0"});
  const MachineSockets s = sockets(cfg, {"--no-huge", "--lcores", "(0-2)@1"}, machine(1, 2));
  EXPECT_EQ(s.lcore_sockets, (std::vector<int>{0, 0}));
  EXPECT_EQ(s.port_sockets, (std::vector<int>{kAnySocket}));
  EXPECT_EQ(s.describe(cfg),
            "memory: sockets (sysfs): lcore 1 on socket 0 (cpu 1), lcore 2 on socket 0 (cpu 1); port nic0 on "
            "socket any (a virtual device)");
}

TEST(MachineSockets, TwoNodesByCpuAndPciDevice) {
  const Config cfg = shaped({1, 2, 3, 4}, {"0000:3b:00.0", "AF:00.0,rxq_cqe_comp_en=0", "0000:5e:00.0"});
  NumaFacts f = machine(2, 8);  // CPUs 0-7 on node 0, 8-15 on node 1
  f.pci_node = {{"0000:3b:00.0", 0}, {"0000:af:00.0", 1}, {"0000:5e:00.0", -1}};
  const MachineSockets s = sockets(cfg, {"--lcores", "0@0,1@2,2@3,3@9,4@(7-8)"}, f);
  EXPECT_EQ(s.lcore_sockets, (std::vector<int>{0, 0, 1, kAnySocket}));
  EXPECT_EQ(s.port_sockets, (std::vector<int>{0, 1, kAnySocket}));
  EXPECT_EQ(s.describe(cfg),
            "memory: sockets (sysfs): lcore 1 on socket 0 (cpu 2), lcore 2 on socket 0 (cpu 3), lcore 3 on socket 1 "
            "(cpu 9), lcore 4 on socket any (cpus 7,8, on 2 nodes); port nic0 on socket 0 (0000:3b:00.0), port nic1 "
            "on socket 1 (0000:af:00.0), port nic2 on socket any (0000:5e:00.0, numa_node -1)");
}

TEST(MachineSockets, FourNodesWithoutLcoreOptionsRunLcoreIOnCpuI) {
  const Config cfg = shaped({1, 5, 9, 13, 40}, {"0000:01:00.0"});
  const MachineSockets s = sockets(cfg, {"-n", "4"}, machine(4, 4));
  EXPECT_EQ(s.lcore_sockets, (std::vector<int>{0, 1, 2, 3, kAnySocket}));
  EXPECT_EQ(s.lcore_why.back(), "cpu 40, not a CPU of this machine's nodes");
  EXPECT_EQ(s.port_sockets, (std::vector<int>{kAnySocket}));
  EXPECT_EQ(s.port_why[0], "0000:01:00.0, not on this machine");
  // -l and -c map the same way; an lcore they do not enable has no socket.
  EXPECT_EQ(sockets(cfg, {"-l", "1,5,9,13"}, machine(4, 4)).lcore_sockets,
            (std::vector<int>{0, 1, 2, 3, kAnySocket}));
  EXPECT_EQ(sockets(cfg, {"-l", "1,5,9,13"}, machine(4, 4)).lcore_why.back(), "not enabled by eal_args");
  EXPECT_EQ(sockets(cfg, {"-c", "0x2222"}, machine(4, 4)).lcore_sockets,
            (std::vector<int>{0, 1, 2, 3, kAnySocket}));
}

TEST(MachineSockets, AWrongLcoreMapIsTheError) {
  auto s = machine_sockets(shaped({1}, {}), {"--lcores", "1@(2"}, machine(1, 4));
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().find("eal_args: --lcores '1@(2'"), std::string::npos) << s.error();
}

TEST(MachineSockets, PciAddressesOfThePorts) {
  EXPECT_EQ(port_pci_addresses(shaped({1}, {"3b:00.1", "net_ring0", "0000:AF:00.0,x=1"})),
            (std::vector<std::string>{"0000:3b:00.1", "0000:af:00.0"}));
}

// What place_memory makes of them: the two-node shape's pools on their ports' sockets.
TEST(MachineSockets, FeedThePlacement) {
  Config cfg = shaped({1, 2}, {"0000:3b:00.0", "0000:af:00.0"});
  cfg.lcores[0].ports = {"nic0"};
  cfg.lcores[1].ports = {"nic1"};
  NumaFacts f = machine(2, 8);
  f.pci_node = {{"0000:3b:00.0", 0}, {"0000:af:00.0", 1}};
  const MachineSockets s = sockets(cfg, {"-l", "1,9"}, f);
  EXPECT_EQ(s.lcore_sockets, (std::vector<int>{0, kAnySocket}));  // -l 1,9: lcore 2 is not enabled
  const MachineSockets mapped = sockets(cfg, {"--lcores", "1@1,2@9"}, f);
  auto pl = place_memory(cfg, queue_map(cfg), mapped.lcore_sockets, mapped.port_sockets);
  ASSERT_TRUE(pl.has_value()) << pl.error();
  EXPECT_EQ(pl->rx_pool_socket, (std::vector<int>{0, 1}));
  EXPECT_EQ(pl->tx_pool_sockets, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace phub::config

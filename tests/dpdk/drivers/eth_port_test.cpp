// EthPort's bursts on a memif port go into the PMD only while its link is up (phub/drivers/eth_port.hpp,
// gated_on_link_): DPDK 22.11's memif reads its shared region before it checks for a peer, which faulted a
// server whose peer was connecting. An RX callback counts the bursts that reached the PMD's queue.
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "phub/drivers/eth_port.hpp"
#include "phub/drivers/mempool.hpp"

namespace phub::drivers {
namespace {

std::atomic<unsigned> g_pmd_bursts{0};

uint16_t count_burst(uint16_t, uint16_t, rte_mbuf**, uint16_t nb_pkts, uint16_t, void*) {
  g_pmd_bursts.fetch_add(1, std::memory_order_relaxed);
  return nb_pkts;
}

class EthPortGate : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = Mempool::create("test_eth_gate", 511, RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()), 0);
    ASSERT_TRUE(p) << p.error();
    pool_ = std::move(*p);
    g_pmd_bursts = 0;
  }

  // Polls queue 0 `n` times with an RX callback installed; returns the frames received.
  unsigned poll(const EthPort& port, int n) {
    const rte_eth_rxtx_callback* cb = rte_eth_add_rx_callback(port.id(), 0, count_burst, nullptr);
    EXPECT_NE(cb, nullptr) << "RX callbacks are needed (RTE_ETHDEV_RXTX_CALLBACKS)";
    unsigned got = 0;
    rte_mbuf* burst[32];
    for (int i = 0; i < n; ++i) {
      const uint16_t k = port.rx(0, burst, 32);
      got += k;
      rte_pktmbuf_free_bulk(burst, k);
    }
    if (cb != nullptr) (void)rte_eth_remove_rx_callback(port.id(), 0, cb);
    return got;
  }

  Mempool pool_;
};

TEST_F(EthPortGate, AMemifPortWithoutAPeerNeverBurstsIntoThePmd) {
  const std::string sock = "/tmp/phub-test-memif-gate-" + std::to_string(getpid()) + ".sock";
  PortSpec spec;
  spec.devargs = "net_memif_gate0,role=server,socket=" + sock;
  spec.rx_pool = pool_.get();
  auto port = EthPort::open(spec);
  ASSERT_TRUE(port) << port.error();
  EXPECT_TRUE(port->gated_on_link());
  EXPECT_FALSE(port->link_up()) << "no peer has connected to " << sock;
  EXPECT_EQ(poll(*port, 1000), 0u);
  EXPECT_EQ(g_pmd_bursts.load(), 0u) << "a burst reached the memif PMD while its link was down";
  rte_mbuf* m = rte_pktmbuf_alloc(pool_.get());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(port->tx(0, &m, 1), 0) << "a frame was taken by a memif port without a peer";
  rte_pktmbuf_free(m);
  *port = EthPort();
  std::remove(sock.c_str());
}

TEST_F(EthPortGate, PortsOfOtherPmdsBurstWithoutTheCheck) {
  PortSpec spec;
  spec.devargs = "net_ring_gate0";
  spec.rx_pool = pool_.get();
  auto port = EthPort::open(spec);
  ASSERT_TRUE(port) << port.error();
  EXPECT_FALSE(port->gated_on_link());
  EXPECT_EQ(poll(*port, 100), 0u);
  EXPECT_EQ(g_pmd_bursts.load(), 100u);
}

}  // namespace
}  // namespace phub::drivers

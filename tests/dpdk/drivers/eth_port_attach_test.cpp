// EthPort in two steps, as the engine opens ports: attach (the device exists, its NUMA socket is known,
// nothing is configured) and then start with a pool made for that socket. A port the attach probed goes
// away with its EthPort; start refuses a second start and a missing pool.
#include <gtest/gtest.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <string>

#include "phub/drivers/eth_port.hpp"
#include "phub/drivers/mempool.hpp"

namespace phub::drivers {
namespace {

bool port_named(const std::string& name) {
  uint16_t id = 0;
  return rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0;
}

TEST(EthPortAttach, AttachKnowsTheSocketBeforeAnyPoolThenStartConfigures) {
  auto port = EthPort::attach("net_ring_attach0");
  ASSERT_TRUE(port) << port.error();
  EXPECT_TRUE(port_named("net_ring_attach0"));
  EXPECT_EQ(port->driver(), "net_ring");
  EXPECT_EQ(port->numa_socket(), rte_eth_dev_socket_id(port->id()));
  EXPECT_GE(port->numa_socket(), -1);
  EXPECT_EQ(port->rx_queues(), 0) << "attached, not configured";

  PortSpec spec;
  spec.devargs = "net_ring_attach0";
  auto missing = port->start(spec);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), "port net_ring_attach0: no RX mempool");

  const int socket = port->numa_socket() < 0 ? static_cast<int>(rte_socket_id()) : port->numa_socket();
  auto pool = Mempool::create("test_attach_rx", 511, RTE_MBUF_DEFAULT_BUF_SIZE, socket, 0);
  ASSERT_TRUE(pool) << pool.error();
  spec.rx_pool = pool->get();
  auto started = port->start(spec);
  ASSERT_TRUE(started) << started.error();
  EXPECT_EQ(port->rx_queues(), 1);
  auto again = port->start(spec);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), "port net_ring_attach0: already started");

  *port = EthPort();  // closed, and removed: the attach probed it
  EXPECT_FALSE(port_named("net_ring_attach0"));
}

TEST(EthPortAttach, ADeviceThatCannotBeProbedIsAnError) {
  auto port = EthPort::attach("net_no_such_pmd0");
  ASSERT_FALSE(port);
  EXPECT_EQ(port.error().rfind("port net_no_such_pmd0: cannot probe 'net_no_such_pmd0'", 0), 0u) << port.error();
  auto empty = EthPort::attach(",x=1");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error(), "port: empty device");
}

TEST(EthPortAttach, ADeviceProbedWithoutAnEthdevPortOfItsNameIsRemovedAgain) {
  // baseband_null makes a bbdev, no ethdev port: the attach fails, and the device it probed goes (the vdev bus
  // no longer holds it: removing it again fails).
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto port = EthPort::attach("baseband_null7");
    ASSERT_FALSE(port);
    EXPECT_EQ(port.error(), "port baseband_null7: probed 'baseband_null7' but no ethdev port has that name")
        << "attempt " << attempt;
    EXPECT_NE(rte_eal_hotplug_remove("vdev", "baseband_null7"), 0) << "attempt " << attempt << ": left probed";
  }
}

}  // namespace
}  // namespace phub::drivers

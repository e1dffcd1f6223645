// One DPDK ethdev port behind a small interface: open any PMD (real NIC, memif, af_packet, af_xdp, tap,
// ring, null, pcap) by devargs, configure its queues, burst RX/TX, steer UDP ports to queues, stats.
#pragma once

#include <rte_ethdev.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/base/mac.hpp"

namespace phub::drivers {

struct PortSpec {
  std::string devargs;          // "net_tap0,iface=phub0", "net_memif0,role=server,socket=/run/x", "0000:3b:00.0"
  uint16_t rx_queues = 1;
  uint16_t tx_queues = 1;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint16_t mtu = 1500;          // IP MTU; PMDs that cannot set it are warned about, not refused
  std::optional<MacAddr> mac;   // override the PMD's MAC
  rte_mempool* rx_pool = nullptr;
};

// A port's counters, each from one field of DPDK's rte_eth_stats: every output (the text report, stats --json,
// Prometheus, telemetry) lists them from this one table.
#define PHUB_PORT_STATS(X)                                                      \
  X(rx_packets, ipackets, "frames the port received")                          \
  X(rx_bytes, ibytes, "bytes the port received")                               \
  X(rx_missed, imissed, "frames the port dropped for want of room")            \
  X(rx_errors, ierrors, "erroneous frames the port received")                  \
  X(rx_nombuf, rx_nombuf, "frames lost for want of an mbuf")                   \
  X(tx_packets, opackets, "frames the port sent")                              \
  X(tx_bytes, obytes, "bytes the port sent")                                   \
  X(tx_errors, oerrors, "frames the port failed to send")

struct PortStats {
#define PHUB_X(name, dpdk, help) uint64_t name = 0;
  PHUB_PORT_STATS(PHUB_X)
#undef PHUB_X
};

struct PortStatField {
  std::string_view name;
  std::string_view help;
  uint64_t PortStats::*member;
};
inline constexpr PortStatField kPortStatFields[] = {
#define PHUB_X(name, dpdk, help) {#name, help, &PortStats::name},
    PHUB_PORT_STATS(PHUB_X)
#undef PHUB_X
};

class EthPort {
 public:
  // attach(spec.devargs), then start(spec).
  [[nodiscard]] static Expected<EthPort, std::string> open(const PortSpec& spec);
  // The ethdev port named by `devargs` (the part before the first comma), probed with them if no port has
  // that name yet (and then removed again when the EthPort goes); neither configured nor started. Its
  // socket is known from here on, before any pool for it exists.
  [[nodiscard]] static Expected<EthPort, std::string> attach(const std::string& devargs);
  // Configures the queues, MTU and MAC of an attached port from `spec` (whose devargs are not read again)
  // and starts it. Once only.
  [[nodiscard]] Expected<void, std::string> start(const PortSpec& spec);
  EthPort() = default;
  ~EthPort();
  EthPort(EthPort&& o) noexcept;
  EthPort& operator=(EthPort&& o) noexcept;
  EthPort(const EthPort&) = delete;
  EthPort& operator=(const EthPort&) = delete;

  [[nodiscard]] uint16_t id() const noexcept { return id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::string& driver() const noexcept { return driver_; }
  [[nodiscard]] const MacAddr& mac() const noexcept { return mac_; }
  [[nodiscard]] uint16_t rx_queues() const noexcept { return rx_queues_; }
  [[nodiscard]] uint16_t tx_queues() const noexcept { return tx_queues_; }
  // The NUMA socket of the device, 0 where the bus does not say.
  [[nodiscard]] int socket() const noexcept;
  // The NUMA socket of the device, or -1 (SOCKET_ID_ANY) where the bus does not say: virtual devices, and a
  // PCI device whose numa_node is unknown.
  [[nodiscard]] int numa_socket() const noexcept;
  // Whether chained mbufs can be sent (results then reference the result buffer without a copy).
  [[nodiscard]] bool tx_multi_seg() const noexcept { return tx_multi_seg_; }
  [[nodiscard]] uint16_t mtu() const noexcept { return mtu_; }
  // Checksum offloads, each requested only where the PMD's capabilities have it (see open()). RX: the PMD
  // gives a verdict in ol_flags (RTE_MBUF_F_RX_IP_CKSUM_*, RTE_MBUF_F_RX_L4_CKSUM_*) and the software check
  // is skipped for what it found good. TX: a UDP frame marked RTE_MBUF_F_TX_UDP_CKSUM, with l2/l3/l4_len and
  // the pseudo-header sum in its checksum field, gets its UDP checksum from the PMD.
  [[nodiscard]] bool rx_ipv4_checksum_offload() const noexcept { return rx_ipv4_cksum_; }
  [[nodiscard]] bool rx_udp_checksum_offload() const noexcept { return rx_udp_cksum_; }
  [[nodiscard]] bool tx_udp_checksum_offload() const noexcept { return tx_udp_cksum_; }

  [[nodiscard]] uint16_t rx(uint16_t queue, rte_mbuf** pkts, uint16_t n) const noexcept {
    if (gated_on_link_ && !link_up()) return 0;
    return rte_eth_rx_burst(id_, queue, pkts, n);
  }
  [[nodiscard]] uint16_t tx(uint16_t queue, rte_mbuf** pkts, uint16_t n) const noexcept {
    if (gated_on_link_ && !link_up()) return 0;
    return rte_eth_tx_burst(id_, queue, pkts, n);
  }
  // Whether the link is up now (the PMD's own view, without waiting).
  [[nodiscard]] bool link_up() const noexcept {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
  }
  // Whether rx() and tx() first check that the link is up (see gated_on_link_).
  [[nodiscard]] bool gated_on_link() const noexcept { return gated_on_link_; }
  // Free mbufs the NIC has finished sending on `queue` (so their external buffers can be reused).
  void tx_done_cleanup(uint16_t queue) const noexcept { (void)rte_eth_tx_done_cleanup(id_, queue, 0); }

  // Install an rte_flow rule sending IPv4/UDP to `dst_ip`:`udp_port` to `queue`. Fails (with the PMD's
  // reason) where the PMD has no rte_flow support; the caller then falls back to ring hand-off.
  [[nodiscard]] Expected<void, std::string> steer_udp_port(uint32_t dst_ip, uint16_t udp_port, uint16_t queue);
  // Remove every flow rule this port installed.
  void flush_flows() noexcept;

  [[nodiscard]] PortStats stats() const noexcept;
  // One line: name, driver, MAC, queues, MTU, offloads (zero-copy TX, checksums, fast free).
  [[nodiscard]] std::string describe() const;

 private:
  void close() noexcept;

  uint16_t id_ = RTE_MAX_ETHPORTS;
  std::string name_;
  std::string driver_;
  MacAddr mac_{};
  uint16_t rx_queues_ = 0;
  uint16_t tx_queues_ = 0;
  uint16_t mtu_ = 0;
  bool tx_multi_seg_ = false;
  bool rx_ipv4_cksum_ = false;
  bool rx_udp_cksum_ = false;
  bool tx_udp_cksum_ = false;
  // net_memif (DPDK 22.11) computes a queue's ring address from its shared-memory region before it checks
  // that the peer is connected. While a peer connects, the control thread maps the region and only then
  // sets the connected flag and the link: a burst that read the region unmapped and the flag set faults
  // (seen in CI: a SEGV at the ring offset 0x4084). Its link goes up after the mapping and down before the
  // unmapping, so a burst that first sees the link up reads a mapped region. A disconnect during a burst
  // that has passed this check remains the PMD's own race: its window is one burst, the unmapping comes
  // after a control-channel exchange.
  bool gated_on_link_ = false;
  bool probed_by_us_ = false;
  bool started_ = false;
  unsigned flows_ = 0;
};

}  // namespace phub::drivers

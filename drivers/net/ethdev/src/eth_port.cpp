// Opening, configuring, starting and closing one ethdev port for any PMD.
#include "phub/drivers/eth_port.hpp"

#include <rte_dev.h>
#include <rte_errno.h>

#include <cstdio>
#include <cstring>
#include <utility>

namespace phub::drivers {
namespace {

std::string err(const std::string& what, int rc) { return what + ": " + rte_strerror(rc < 0 ? -rc : rc); }

// Remove the device named `name` that an attach probed (its driver made no ethdev port of that name: a device
// of another class, or a PMD that names its ports otherwise), from whichever bus holds it, so that a failed
// attach leaves nothing behind. (rte_devargs_parse would name the bus, but freeing what it allocates,
// rte_devargs_reset, is still experimental in DPDK 22.11.)
void remove_probed(const std::string& name) noexcept {
  for (const char* bus : {"vdev", "pci", "auxiliary", "vmbus"}) {
    if (rte_eal_hotplug_remove(bus, name.c_str()) == 0) return;
  }
}

}  // namespace

Expected<EthPort, std::string> EthPort::open(const PortSpec& spec) {
  auto p = attach(spec.devargs);
  if (!p) return unexpected(p.error());
  if (auto started = p->start(spec); !started) return unexpected(started.error());
  return std::move(*p);
}

Expected<EthPort, std::string> EthPort::attach(const std::string& devargs) {
  EthPort p;
  p.name_ = devargs.substr(0, devargs.find(','));
  if (p.name_.empty()) return unexpected(std::string("port: empty device"));
  if (rte_eth_dev_get_port_by_name(p.name_.c_str(), &p.id_) != 0) {
    const int rc = rte_dev_probe(devargs.c_str());
    if (rc < 0) return unexpected(err("port " + p.name_ + ": cannot probe '" + devargs + "'", rc));
    p.probed_by_us_ = true;
    if (rte_eth_dev_get_port_by_name(p.name_.c_str(), &p.id_) != 0) {
      p.probed_by_us_ = false;
      p.id_ = RTE_MAX_ETHPORTS;
      remove_probed(p.name_);
      return unexpected("port " + p.name_ + ": probed '" + devargs + "' but no ethdev port has that name");
    }
  }
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(p.id_, &info); rc != 0) return unexpected(err("port " + p.name_ + ": info", rc));
  p.driver_ = info.driver_name ? info.driver_name : "?";
  return p;
}

Expected<void, std::string> EthPort::start(const PortSpec& spec) {
  EthPort& p = *this;
  if (p.id_ >= RTE_MAX_ETHPORTS) return unexpected("port " + p.name_ + ": not attached");
  if (p.started_) return unexpected("port " + p.name_ + ": already started");
  if (spec.rx_pool == nullptr) return unexpected("port " + p.name_ + ": no RX mempool");

  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(p.id_, &info); rc != 0) return unexpected(err("port " + p.name_ + ": info", rc));
  p.gated_on_link_ = p.driver_ == "net_memif";
  if (spec.rx_queues == 0 || spec.tx_queues == 0 || spec.rx_queues > info.max_rx_queues ||
      spec.tx_queues > info.max_tx_queues) {
    return unexpected("port " + p.name_ + " (" + p.driver_ + "): " + std::to_string(spec.rx_queues) + " RX / " +
                      std::to_string(spec.tx_queues) + " TX queues requested, the PMD offers " +
                      std::to_string(info.max_rx_queues) + " RX / " + std::to_string(info.max_tx_queues) + " TX");
  }
  p.rx_queues_ = spec.rx_queues;
  p.tx_queues_ = spec.tx_queues;

  rte_eth_conf conf{};
  const uint64_t rss = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
  if (spec.rx_queues > 1 && rss != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = rss;
  }
  p.tx_multi_seg_ = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  if (p.tx_multi_seg_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  // Checksums, where the PMD has them. Not MBUF_FAST_FREE: it needs every mbuf a queue sends to come from
  // one mempool with a refcount of 1, and a queue sends header mbufs, copies and ARP/ICMP replies from
  // different pools, chained to result segments shared between packets (refcounted, external buffers).
  p.rx_ipv4_cksum_ = (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0;
  p.rx_udp_cksum_ = (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) != 0;
  p.tx_udp_cksum_ = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
  if (p.rx_ipv4_cksum_) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
  if (p.rx_udp_cksum_) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
  if (p.tx_udp_cksum_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
  if (int rc = rte_eth_dev_configure(p.id_, spec.rx_queues, spec.tx_queues, &conf); rc != 0) {
    return unexpected(err("port " + p.name_ + ": configure", rc));
  }

  uint16_t rxd = spec.rx_desc, txd = spec.tx_desc;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(p.id_, &rxd, &txd); rc != 0) {
    return unexpected(err("port " + p.name_ + ": descriptor counts", rc));
  }
  // The descriptor rings go on the device's socket; where the bus does not say (virtual devices), on that of
  // the RX pool, which the caller placed near the port's pollers: socket 0 may have no memory at all there.
  const int sock = p.numa_socket() >= 0 ? p.numa_socket() : spec.rx_pool->socket_id;
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  for (uint16_t q = 0; q < spec.rx_queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(p.id_, q, rxd, sock, nullptr, spec.rx_pool); rc != 0) {
      return unexpected(err("port " + p.name_ + ": RX queue " + std::to_string(q), rc));
    }
  }
  for (uint16_t q = 0; q < spec.tx_queues; ++q) {
    if (int rc = rte_eth_tx_queue_setup(p.id_, q, txd, sock, &txconf); rc != 0) {
      return unexpected(err("port " + p.name_ + ": TX queue " + std::to_string(q), rc));
    }
  }

  if (int rc = rte_eth_dev_set_mtu(p.id_, spec.mtu); rc != 0) {
    // memif and ring cannot set an MTU at all; af_packet reports a fixed 1518-byte maximum although the
    // kernel interface's own MTU is what governs it. Both are warnings; a real NIC refusing is an error.
    const bool kernel_mtu = p.driver_ == "net_af_packet" && rc == -EINVAL;
    if (rc != -ENOTSUP && !kernel_mtu) {
      return unexpected(err("port " + p.name_ + ": MTU " + std::to_string(spec.mtu), rc));
    }
    std::fprintf(stderr, "phub: port %s (%s): cannot set MTU %u (%s); continuing\n", p.name_.c_str(),
                 p.driver_.c_str(), spec.mtu,
                 kernel_mtu ? "the kernel interface's MTU applies" : "not supported by the PMD");
  }
  p.mtu_ = spec.mtu;
  if (spec.mac) {
    rte_ether_addr a;
    std::memcpy(a.addr_bytes, spec.mac->data(), 6);
    if (int rc = rte_eth_dev_default_mac_addr_set(p.id_, &a); rc != 0) {
      return unexpected(err("port " + p.name_ + ": set MAC " + format_mac(*spec.mac), rc));
    }
  }
  if (int rc = rte_eth_dev_start(p.id_); rc != 0) return unexpected(err("port " + p.name_ + ": start", rc));
  p.started_ = true;
  (void)rte_eth_dev_set_link_up(p.id_);

  rte_ether_addr a;
  if (int rc = rte_eth_macaddr_get(p.id_, &a); rc != 0) return unexpected(err("port " + p.name_ + ": MAC", rc));
  std::memcpy(p.mac_.data(), a.addr_bytes, 6);
  return {};
}

int EthPort::socket() const noexcept {
  const int s = numa_socket();
  return s < 0 ? 0 : s;
}

int EthPort::numa_socket() const noexcept { return rte_eth_dev_socket_id(id_); }

EthPort::EthPort(EthPort&& o) noexcept { *this = std::move(o); }

EthPort& EthPort::operator=(EthPort&& o) noexcept {
  if (this != &o) {
    close();
    id_ = std::exchange(o.id_, RTE_MAX_ETHPORTS);
    name_ = std::move(o.name_);
    driver_ = std::move(o.driver_);
    mac_ = o.mac_;
    rx_queues_ = o.rx_queues_;
    tx_queues_ = o.tx_queues_;
    mtu_ = o.mtu_;
    tx_multi_seg_ = o.tx_multi_seg_;
    rx_ipv4_cksum_ = o.rx_ipv4_cksum_;
    rx_udp_cksum_ = o.rx_udp_cksum_;
    tx_udp_cksum_ = o.tx_udp_cksum_;
    gated_on_link_ = o.gated_on_link_;
    probed_by_us_ = std::exchange(o.probed_by_us_, false);
    started_ = std::exchange(o.started_, false);
    flows_ = std::exchange(o.flows_, 0u);
  }
  return *this;
}

EthPort::~EthPort() { close(); }

void EthPort::close() noexcept {
  if (id_ >= RTE_MAX_ETHPORTS) return;
  flush_flows();
  rte_eth_dev_info info{};
  const bool have_info = rte_eth_dev_info_get(id_, &info) == 0;
  if (started_) (void)rte_eth_dev_stop(id_);
  (void)rte_eth_dev_close(id_);
  if (probed_by_us_ && have_info && info.device != nullptr) (void)rte_dev_remove(info.device);
  id_ = RTE_MAX_ETHPORTS;
  started_ = false;
  probed_by_us_ = false;
}

PortStats EthPort::stats() const noexcept {
  PortStats s;
  rte_eth_stats st{};
  if (rte_eth_stats_get(id_, &st) == 0) {
#define PHUB_X(name, dpdk, help) s.name = st.dpdk;
    PHUB_PORT_STATS(PHUB_X)
#undef PHUB_X
  }
  return s;
}

std::string EthPort::describe() const {
  return "port " + name_ + " (id " + std::to_string(id_) + ", driver " + driver_ + "): mac " + format_mac(mac_) +
         ", " + std::to_string(rx_queues_) + " RX / " + std::to_string(tx_queues_) + " TX queue(s), mtu " + std::to_string(mtu_) +
         ", zero-copy tx " + (tx_multi_seg_ ? "yes" : "no (results copied)") + ", rx-ipv4-cksum " +
         (rx_ipv4_cksum_ ? "hw" : "sw") + ", rx-udp-cksum " + (rx_udp_cksum_ ? "hw" : "sw") + ", tx-udp-cksum " +
         (tx_udp_cksum_ ? "hw" : "off (field 0)") + ", fast-free no (mixed pools, shared segments)";
}

}  // namespace phub::drivers

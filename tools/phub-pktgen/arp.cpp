// Before the first run: wait for the link, then learn the server's MAC address by ARP. On net_memif the
// first connection sometimes comes up with a queue that never passes traffic (seen with two queue pairs
// on DPDK 22.11); an unanswered ARP therefore restarts the port, which makes memif reconnect. But DPDK
// 22.11's memif unmaps the shared rings on a disconnect without waiting for the peer's lcores, so a
// phub-server polling the link can die of it (seen: SIGSEGV in its rx burst). Under a harness (--linger)
// the generator does not restart: it reports the unanswered ARP (exit status 75) and the harness starts
// both sides again.
#include <rte_ethdev.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "generator.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/drivers/arp_mbuf.hpp"

namespace phub::pktgen {
namespace {

using Clock = std::chrono::steady_clock;

bool link_up(uint16_t port) {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

}  // namespace

Expected<void, std::string> Generator::wait_link(Clock::time_point deadline) {
  while (!link_up(port_->id())) {
    if (Clock::now() > deadline) return unexpected("port " + port_->name() + ": link still down (is the server up?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // memif reports the link up from its control thread while the peer may still be mapping rings; give
  // both sides a moment before the first burst touches the queues.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return {};
}

bool Generator::arp_exchange(Clock::time_point until) {
  const uint32_t my_ip = jobs_->front().addrs.ip_of(0);
  auto next_request = Clock::now();
  rte_mbuf* pkts[32];
  while (Clock::now() < until) {
    if (Clock::now() >= next_request) {
      next_request = Clock::now() + std::chrono::milliseconds(200);
      rte_mbuf* m = drivers::alloc_arp_request(full_pool_.get(), port_->mac(), my_ip, cfg_.target.server_ip);
      if (m == nullptr) return false;
      if (port_->tx(0, &m, 1) != 1) rte_pktmbuf_free(m);
    }
    // On memif the reply comes back on queue 0 (the server lcore that got the request on its queue 0
    // answers); on af_packet or tap the kernel's fan-out or RSS may put it on any queue.
    for (uint16_t q = 0; q < port_->rx_queues(); ++q) {
      const uint16_t n = port_->rx(q, pkts, 32);
      for (uint16_t i = 0; i < n; ++i) {
        const auto arp = drivers::arp_of(pkts[i]);
        if (arp && arp->op == proto::ArpOp::reply && arp->sender_ip == cfg_.target.server_ip) {
          for (auto& j : *jobs_) j.addrs.server_mac = arp->sender_mac;
          cfg_.target.server_mac = arp->sender_mac;
        }
        rte_pktmbuf_free(pkts[i]);
      }
    }
    if (cfg_.target.server_mac) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

Expected<void, std::string> Generator::resolve(double timeout_s, bool may_restart) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  if (auto r = wait_link(deadline); !r) return r;
  if (cfg_.target.server_mac) return {};
  for (int attempt = 1;; ++attempt) {
    if (arp_exchange(std::min<Clock::time_point>(deadline, Clock::now() + std::chrono::seconds(2)))) return {};
    if (Clock::now() >= deadline || attempt == 4 || !may_restart) break;
    std::fprintf(stderr, "pktgen: no ARP reply from %s; restarting port %s\n",
                 format_ipv4(cfg_.target.server_ip).c_str(), port_->name().c_str());
    (void)rte_eth_dev_stop(port_->id());
    if (rte_eth_dev_start(port_->id()) != 0) return unexpected("port " + port_->name() + ": restart failed");
    if (auto r = wait_link(deadline); !r) return r;
  }
  arp_unanswered_ = true;
  if (!may_restart) {
    return unexpected("ARP: no reply from " + format_ipv4(cfg_.target.server_ip) +
                      " in 2 s; the port is not restarted under --linger (exit status 75: start both sides again)");
  }
  return unexpected("ARP: no reply from " + format_ipv4(cfg_.target.server_ip) + " within " +
                    std::to_string(timeout_s) + " s (give --server-mac to skip ARP)");
}

}  // namespace phub::pktgen

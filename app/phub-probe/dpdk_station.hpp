// One DPDK port as a small IPv4 host for the probe: answers ARP and ping for its address, reflects
// probe_request datagrams with its TSC turnaround, learns MACs only from replies to its own ARP requests,
// and hands matching probe replies to the prober.
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "arp_cache.hpp"
#include "phub/base/mac.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/proto/frame.hpp"
#include "probe_body.hpp"

namespace phub::probe {

struct StationAddr {
  MacAddr mac{};
  uint32_t ip = 0;  // host order
  uint32_t netmask = 0;
  uint32_t gateway = 0;  // 0: none
  uint16_t udp_port = 0;
};

// Where a probe request goes.
struct ProbeTarget {
  MacAddr mac{};  // next hop
  uint32_t ip = 0;
  uint16_t udp_port = 0;
};

// The one reply the prober is waiting for; poll() fills in the receive side when it arrives.
struct AwaitedReply {
  uint32_t peer_ip = 0;
  uint16_t peer_port = 0;
  uint32_t seq = 0;
  uint32_t nonce = 0;
  uint64_t stamp_tsc = 0;  // when the request left (also carried in its body)
  bool arrived = false;
  uint64_t rx_tsc = 0;         // right after the RX burst that brought the reply
  uint64_t turnaround_ns = 0;  // as the reflector reported it (0 from kernel reflectors)
};

struct StationCounters {
  uint64_t rx_frames = 0, reflected = 0, arp_answered = 0, pings_answered = 0;
  uint64_t replies_matched = 0, replies_unmatched = 0, tx_failed = 0;
  uint64_t arp_ignored = 0;  // ARP replies nobody asked for (or not to us) and gratuitous ARP: not learnt
};

class Station {
 public:
  Station(const drivers::EthPort& port, rte_mempool* pool, const StationAddr& addr, uint64_t tsc_hz);

  // One RX burst, every frame handled; replies leave in one TX burst. Returns the frames addressed to
  // this station (ARP for its address, ping, probe datagrams).
  unsigned poll(AwaitedReply* awaited) noexcept;

  // Next hop for `ip`: itself when on-link, else the gateway (0 when there is none).
  [[nodiscard]] uint32_t next_hop(uint32_t ip) const noexcept;
  [[nodiscard]] const MacAddr* mac_of(uint32_t ip) const noexcept;
  // Asks who has `target_ip`; its reply is learnt if it comes within `answer_within` TSC cycles.
  [[nodiscard]] bool send_arp_request(uint32_t target_ip, uint64_t answer_within) noexcept;
  // Sends probe_request `seq` with a body of `body_bytes`; returns its TSC stamp, or 0 if it was not sent.
  [[nodiscard]] uint64_t send_probe_request(const ProbeTarget& to, uint32_t seq, uint32_t nonce,
                                            size_t body_bytes) noexcept;

  [[nodiscard]] uint64_t cycles_to_ns(uint64_t cycles) const noexcept {
    return static_cast<uint64_t>(static_cast<double>(cycles) * ns_per_cycle_);
  }
  [[nodiscard]] const StationCounters& counters() const noexcept { return counters_; }
  // TSC of the RX burst that brought the latest probe request (0 before the first).
  [[nodiscard]] uint64_t last_request_tsc() const noexcept { return last_request_tsc_; }
  [[nodiscard]] const StationAddr& addr() const noexcept { return addr_; }

 private:
  enum class Fate { drop, send, send_stamped };
  Fate handle(rte_mbuf* m, uint64_t rx_tsc, AwaitedReply* awaited, std::byte*& stamp_at, unsigned& ours) noexcept;
  Fate handle_arp(std::span<std::byte> frame, const proto::L2& l2, rte_mbuf* m, uint64_t now, unsigned& ours) noexcept;
  bool send_one(rte_mbuf* m) noexcept;

  const drivers::EthPort& port_;
  rte_mempool* pool_;
  StationAddr addr_;
  double ns_per_cycle_;
  ArpCache arp_;
  StationCounters counters_;
  uint64_t last_request_tsc_ = 0;
  std::array<std::byte, kMaxBodyBytes> body_{};  // request body template: zero but for stamp and nonce
};

}  // namespace phub::probe

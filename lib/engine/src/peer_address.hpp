// A rank's address as the lcore knows it (Peer): where its packets come from, and where its answers go.
#pragma once

#include <cstdint>

#include "phub/base/mac.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {

// Where the rank's packets now come from: results and errors go there (the cached headers are rewritten).
// A new address proves itself again, unless the way it was learned proved it (a session's keys needed the
// joined sent there).
inline void set_address(Peer& p, const MacAddr& mac, uint32_t ip, uint16_t udp_port, uint16_t port, bool proven) noexcept {
  p.mac = mac;
  p.ip = ip;
  p.udp_port = udp_port;
  p.port = static_cast<uint8_t>(port);
  p.known = true;
  p.l234_generation = 0;
  p.proven = proven;
  p.unproven_credit_bytes = 0;
}

// Whether the packet came from the rank's current address: MAC, IPv4, UDP port and server port.
inline bool at_address(const Peer& p, const proto::L2& l2, const proto::Ipv4& ip, const proto::Udp& udp,
                uint16_t port) noexcept {
  return p.known && p.ip == ip.src && p.udp_port == udp.src_port && mac_equal(p.mac, l2.src) && p.port == port;
}

}  // namespace phub::engine

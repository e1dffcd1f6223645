// ARP in mbufs: a broadcast request or the reply to a request, written into an mbuf padded to the 60-byte
// Ethernet minimum, and the ARP packet an mbuf holds (the frame bytes come from lib/proto).
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <optional>

#include "phub/base/mac.hpp"
#include "phub/proto/arp_icmp.hpp"

namespace phub::drivers {

inline constexpr uint16_t kMinEthFrameBytes = 60;  // without the FCS; the ARP frame (42 bytes) is zero-padded

// A broadcast request from `my_mac`/`my_ip` for `target_ip`, in an mbuf from `pool`; nullptr if it is empty.
[[nodiscard]] rte_mbuf* alloc_arp_request(rte_mempool* pool, const MacAddr& my_mac, uint32_t my_ip,
                                          uint32_t target_ip) noexcept;
// The reply to `req` as the owner of `my_ip` at `my_mac`, in an mbuf from `pool`; nullptr if it is empty.
[[nodiscard]] rte_mbuf* alloc_arp_reply(rte_mempool* pool, const proto::Arp& req, const MacAddr& my_mac,
                                        uint32_t my_ip) noexcept;
// The same reply written over `m` (e.g. the received request: `req` is a copy, not a view of its bytes); m is
// reset first. False, with `m` unchanged, unless m is a direct single-segment mbuf with room for the frame.
[[nodiscard]] bool rewrite_as_arp_reply(rte_mbuf* m, const proto::Arp& req, const MacAddr& my_mac,
                                        uint32_t my_ip) noexcept;

// The ARP packet in `m`'s first segment, if it holds a well-formed Ethernet/IPv4 ARP request or reply.
[[nodiscard]] std::optional<proto::Arp> arp_of(const rte_mbuf* m) noexcept;

}  // namespace phub::drivers

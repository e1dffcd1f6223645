// ARP and ICMP echo: what a host must answer so kernel-UDP workers can reach the server (no DPDK).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "phub/base/expected.hpp"
#include "phub/proto/errors.hpp"
#include "phub/proto/frame.hpp"

namespace phub::proto {

inline constexpr size_t kArpBytes = 28;
inline constexpr size_t kArpFrameBytes = kEthBytes + kArpBytes;  // 42 (padded to 60 on the wire by the NIC)

enum class ArpOp : uint16_t { request = 1, reply = 2 };

struct Arp {
  ArpOp op = ArpOp::request;
  MacAddr sender_mac{};
  uint32_t sender_ip = 0;  // host order
  MacAddr target_mac{};
  uint32_t target_ip = 0;
};

// Parse an Ethernet/IPv4 ARP packet (htype 1, ptype 0x0800, hlen 6, plen 4, op request or reply).
[[nodiscard]] Expected<Arp, ParseError> parse_arp(std::span<const std::byte> frame, const L2& l2) noexcept;

// Build the reply to `req` as the owner of `my_ip`/`my_mac`. `out` must hold kArpFrameBytes; returns bytes.
[[nodiscard]] size_t build_arp_reply(const Arp& req, const MacAddr& my_mac, uint32_t my_ip,
                                     std::span<std::byte, kArpFrameBytes> out) noexcept;
// Build a broadcast request for `target_ip`.
[[nodiscard]] size_t build_arp_request(const MacAddr& my_mac, uint32_t my_ip, uint32_t target_ip,
                                       std::span<std::byte, kArpFrameBytes> out) noexcept;

struct IcmpEcho {
  uint16_t id = 0;
  uint16_t seq = 0;
  size_t icmp_offset = 0;  // from frame start
  size_t icmp_bytes = 0;   // ICMP header + data
};

// Parse an ICMP echo request (type 8, code 0) with a valid ICMP checksum.
[[nodiscard]] Expected<IcmpEcho, ParseError> parse_icmp_echo_request(std::span<const std::byte> frame,
                                                                     const Ipv4& ip) noexcept;

// Turn the echo request in `frame` into its reply, in place: swap MACs and IPs, type 0, fix checksums.
void icmp_echo_reply_in_place(std::span<std::byte> frame, const L2& l2, const Ipv4& ip,
                              const IcmpEcho& echo) noexcept;

}  // namespace phub::proto

// Ethernet / IPv4 / UDP framing around the phub header: layered parse and build (no DPDK).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "phub/base/expected.hpp"
#include "phub/base/mac.hpp"
#include "phub/proto/errors.hpp"
#include "phub/proto/header.hpp"

namespace phub::proto {

inline constexpr size_t kEthBytes = 14;
inline constexpr size_t kVlanBytes = 4;
inline constexpr size_t kIpv4Bytes = 20;  // without options
inline constexpr size_t kUdpBytes = 8;
inline constexpr size_t kFrameHeadersBytes = kEthBytes + kIpv4Bytes + kUdpBytes + kHeaderBytes;  // 96

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoUdp = 17;

// Layer 2: Ethernet with at most one 802.1Q tag.
struct L2 {
  MacAddr dst{};
  MacAddr src{};
  uint16_t vlan_tci = 0;  // 0 when untagged
  uint16_t ether_type = 0;
  size_t l3_offset = 0;
};

struct Ipv4 {
  uint32_t src = 0;  // host order
  uint32_t dst = 0;
  uint8_t protocol = 0;
  uint8_t ttl = 0;
  size_t l4_offset = 0;  // from frame start
  size_t l4_bytes = 0;   // from the IPv4 total length (Ethernet padding excluded)
};

struct Udp {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  size_t payload_offset = 0;  // from frame start
  size_t payload_bytes = 0;
};

[[nodiscard]] Expected<L2, ParseError> parse_l2(std::span<const std::byte> frame) noexcept;
// The same checks, filling `out` in place (hot paths: no copy of a struct just written field by field).
// Returns the error, or nothing on success; on error `out` holds partial values.
[[nodiscard]] std::optional<ParseError> parse_l2_into(std::span<const std::byte> frame, L2& out) noexcept;
// Validates version, IHL, total length against the frame, no fragmentation, and (optionally) the checksum.
[[nodiscard]] Expected<Ipv4, ParseError> parse_ipv4(std::span<const std::byte> frame, const L2& l2,
                                                    bool verify_checksum = true) noexcept;
[[nodiscard]] std::optional<ParseError> parse_ipv4_into(std::span<const std::byte> frame, const L2& l2,
                                                        bool verify_checksum, Ipv4& out) noexcept;
[[nodiscard]] Expected<Udp, ParseError> parse_udp(std::span<const std::byte> frame, const Ipv4& ip) noexcept;
[[nodiscard]] std::optional<ParseError> parse_udp_into(std::span<const std::byte> frame, const Ipv4& ip,
                                                       Udp& out) noexcept;

// A fully parsed phub datagram: all layers and the payload view.
struct PhubFrame {
  L2 l2;
  Ipv4 ip;
  Udp udp;
  Header hdr;
  std::span<const std::byte> payload;  // hdr.payload_bytes bytes inside the frame
};

[[nodiscard]] Expected<PhubFrame, ParseError> parse_phub_frame(std::span<const std::byte> frame,
                                                               bool verify_ip_checksum = true) noexcept;

// Addresses of one direction of a phub flow.
struct FlowAddrs {
  MacAddr src_mac{};
  MacAddr dst_mac{};
  uint32_t src_ip = 0;  // host order
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t ttl = 64;
};

// Write Ethernet, IPv4 and UDP headers for a UDP payload of `udp_payload_bytes` (phub header included)
// into out[0..42). The IPv4 checksum is filled in; the UDP checksum is left 0 (legal for IPv4) unless
// `udp_payload` is given, in which case the full UDP checksum over it is computed.
void write_eth_ipv4_udp(const FlowAddrs& a, size_t udp_payload_bytes, std::span<std::byte> out,
                        std::span<const std::byte> udp_payload = {}) noexcept;

// A complete frame: Ethernet/IPv4/UDP + phub header + payload. Returns the frame length.
[[nodiscard]] Expected<size_t, BuildError> build_phub_frame(const FlowAddrs& a, const Header& h,
                                                            std::span<const std::byte> payload,
                                                            std::span<std::byte> out) noexcept;

// The one's-complement Internet checksum of `data` folded to 16 bits (RFC 1071), host order.
[[nodiscard]] uint16_t inet_checksum(std::span<const std::byte> data, uint32_t initial_sum = 0) noexcept;

// The UDP checksum of a datagram parse_udp accepted: true when it checks over the pseudo-header, the UDP
// header and the payload, or when the field is 0 (no checksum, legal for IPv4).
[[nodiscard]] bool udp_checksum_ok(std::span<const std::byte> frame, const Ipv4& ip) noexcept;
// For a port whose NIC computes the UDP checksum (TX offload): write into the UDP checksum field of `l234`
// (Ethernet, IPv4 and UDP headers as write_eth_ipv4_udp writes them) the folded, uncomplemented sum of the
// IPv4 pseudo-header (addresses, protocol, UDP length), which the NIC completes over the datagram.
void seed_udp_checksum_offload(std::span<std::byte> l234) noexcept;
// After bytes under a UDP checksum changed (a header signed after build_phub_frame): recompute it, if the
// frame is IPv4/UDP and has one (a 0 field stays 0).
void refresh_udp_checksum(std::span<std::byte> frame) noexcept;

// Elements of dtype `d` that fit in one frame for an IP MTU with `reserve_bytes` after them, rounded down to a
// multiple of 16 elements so that every segment but the last of a chunk is a whole number of SIMD vectors.
[[nodiscard]] constexpr uint32_t segment_elems(uint32_t ip_mtu, Dtype d, size_t reserve_bytes = 0) noexcept {
  const size_t overhead = kIpv4Bytes + kUdpBytes + kHeaderBytes + reserve_bytes;
  if (ip_mtu <= overhead) return 0;
  const size_t elems = (ip_mtu - overhead) / dtype_bytes(d);
  return static_cast<uint32_t>(elems / 16 * 16);
}

// A job's segment: a ps job's pushes and partials end with the tail (header.hpp, flag::tail), so its segments
// leave room for it (at MTU 1500 the segment is the same, 352 fp32 or 704 16-bit elements).
[[nodiscard]] constexpr uint32_t job_segment_elems(uint32_t ip_mtu, Dtype d, bool ps) noexcept {
  return segment_elems(ip_mtu, d, ps ? kTailBytes : 0);
}

}  // namespace phub::proto

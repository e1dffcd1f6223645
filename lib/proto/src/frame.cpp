// Ethernet / IPv4 / UDP parsing and building, bounds-checked against the real frame length.
#include "phub/proto/frame.hpp"

#include <bit>
#include <cstring>
#include <optional>

#include "phub/base/bytes.hpp"

namespace phub::proto {

uint16_t inet_checksum(std::span<const std::byte> data, uint32_t initial_sum) noexcept {
  // One's-complement sums do not depend on byte order (RFC 1071, 2B): add host-order 32-bit pieces into a
  // 64-bit accumulator, fold, and swap the 16-bit result into network order once at the end.
  const std::byte* p = data.data();
  size_t n = data.size();
  uint64_t acc = 0;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    acc += (w & 0xffffffffu) + (w >> 32);
  }
  if (n >= 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    acc += w;
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    acc += w;
    p += 2;
    n -= 2;
  }
  if (n != 0) {  // a trailing byte is the high-order byte of a network-order word
    const auto b = static_cast<uint8_t>(*p);
    acc += std::endian::native == std::endian::little ? b : static_cast<uint32_t>(b) << 8;
  }
  while ((acc >> 16) != 0) acc = (acc & 0xffff) + (acc >> 16);
  uint64_t sum = host_to_be(static_cast<uint16_t>(acc));
  sum += initial_sum;
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

std::optional<ParseError> parse_l2_into(std::span<const std::byte> frame, L2& l2) noexcept {
  if (frame.size() < kEthBytes) return ParseError::frame_too_short;
  std::memcpy(l2.dst.data(), frame.data(), 6);
  std::memcpy(l2.src.data(), frame.data() + 6, 6);
  l2.vlan_tci = 0;
  l2.ether_type = load_be<uint16_t>(frame.data() + 12);
  l2.l3_offset = kEthBytes;
  if (l2.ether_type == kEtherTypeVlan) {
    if (frame.size() < kEthBytes + kVlanBytes) return ParseError::vlan_too_short;
    l2.vlan_tci = load_be<uint16_t>(frame.data() + 14);
    l2.ether_type = load_be<uint16_t>(frame.data() + 16);
    l2.l3_offset = kEthBytes + kVlanBytes;
  }
  return std::nullopt;
}

Expected<L2, ParseError> parse_l2(std::span<const std::byte> frame) noexcept {
  L2 l2;
  if (auto e = parse_l2_into(frame, l2)) return unexpected(*e);
  return l2;
}

std::optional<ParseError> parse_ipv4_into(std::span<const std::byte> frame, const L2& l2, bool verify_checksum,
                                          Ipv4& ip) noexcept {
  if (l2.ether_type != kEtherTypeIpv4) return ParseError::not_ipv4;
  if (frame.size() < l2.l3_offset + kIpv4Bytes) return ParseError::frame_too_short;
  const std::byte* p = frame.data() + l2.l3_offset;
  const auto ver_ihl = static_cast<uint8_t>(p[0]);
  if ((ver_ihl >> 4) != 4) return ParseError::ipv4_bad_version;
  const size_t ihl_bytes = (ver_ihl & 0x0f) * 4u;
  if (ihl_bytes < kIpv4Bytes) return ParseError::ipv4_bad_ihl;
  const size_t total = load_be<uint16_t>(p + 2);
  if (total < ihl_bytes || l2.l3_offset + total > frame.size()) return ParseError::ipv4_bad_total_length;
  const uint16_t frag = load_be<uint16_t>(p + 6);
  if ((frag & 0x3fff) != 0) return ParseError::ipv4_fragment;  // MF set or non-zero offset
  if (verify_checksum && inet_checksum(std::span(p, ihl_bytes)) != 0) return ParseError::ipv4_bad_checksum;
  ip.ttl = static_cast<uint8_t>(p[8]);
  ip.protocol = static_cast<uint8_t>(p[9]);
  ip.src = load_be<uint32_t>(p + 12);
  ip.dst = load_be<uint32_t>(p + 16);
  ip.l4_offset = l2.l3_offset + ihl_bytes;
  ip.l4_bytes = total - ihl_bytes;
  return std::nullopt;
}

Expected<Ipv4, ParseError> parse_ipv4(std::span<const std::byte> frame, const L2& l2, bool verify_checksum) noexcept {
  Ipv4 ip;
  if (auto e = parse_ipv4_into(frame, l2, verify_checksum, ip)) return unexpected(*e);
  return ip;
}

std::optional<ParseError> parse_udp_into(std::span<const std::byte> frame, const Ipv4& ip, Udp& u) noexcept {
  if (ip.protocol != kIpProtoUdp) return ParseError::not_udp;
  if (ip.l4_bytes < kUdpBytes) return ParseError::udp_bad_length;
  const std::byte* p = frame.data() + ip.l4_offset;
  const size_t udp_len = load_be<uint16_t>(p + 4);
  if (udp_len != ip.l4_bytes) return ParseError::udp_bad_length;
  u.src_port = load_be<uint16_t>(p);
  u.dst_port = load_be<uint16_t>(p + 2);
  u.payload_offset = ip.l4_offset + kUdpBytes;
  u.payload_bytes = udp_len - kUdpBytes;
  return std::nullopt;
}

Expected<Udp, ParseError> parse_udp(std::span<const std::byte> frame, const Ipv4& ip) noexcept {
  Udp u;
  if (auto e = parse_udp_into(frame, ip, u)) return unexpected(*e);
  return u;
}

Expected<PhubFrame, ParseError> parse_phub_frame(std::span<const std::byte> frame, bool verify_ip_checksum) noexcept {
  // Filled in place and returned by the one object (named return value): no copies of structs just
  // written field by field, which would stall on store forwarding.
  Expected<PhubFrame, ParseError> r{PhubFrame{}};
  PhubFrame& f = *r;
  std::optional<ParseError> e = parse_l2_into(frame, f.l2);
  if (!e) e = parse_ipv4_into(frame, f.l2, verify_ip_checksum, f.ip);
  if (!e) e = parse_udp_into(frame, f.ip, f.udp);
  std::span<const std::byte> msg;
  if (!e) {
    msg = frame.subspan(f.udp.payload_offset, f.udp.payload_bytes);
    e = parse_header_into(msg, f.hdr);
  }
  if (e) {
    r = unexpected(*e);
  } else {
    f.payload = msg.subspan(kHeaderBytes);
  }
  return r;
}

void write_eth_ipv4_udp(const FlowAddrs& a, size_t udp_payload_bytes, std::span<std::byte> out,
                        std::span<const std::byte> udp_payload) noexcept {
  std::byte* p = out.data();
  std::memcpy(p, a.dst_mac.data(), 6);
  std::memcpy(p + 6, a.src_mac.data(), 6);
  store_be<uint16_t>(p + 12, kEtherTypeIpv4);

  std::byte* ip = p + kEthBytes;
  const auto ip_total = static_cast<uint16_t>(kIpv4Bytes + kUdpBytes + udp_payload_bytes);
  ip[0] = std::byte{0x45};
  ip[1] = std::byte{0};
  store_be<uint16_t>(ip + 2, ip_total);
  store_be<uint16_t>(ip + 4, 0);       // identification: no fragments are ever sent
  store_be<uint16_t>(ip + 6, 0x4000);  // DF
  ip[8] = std::byte{a.ttl};
  ip[9] = std::byte{kIpProtoUdp};
  store_be<uint32_t>(ip + 12, a.src_ip);
  store_be<uint32_t>(ip + 16, a.dst_ip);
  // The header's checksum from the values just written, not by reading back the bytes (a load of freshly
  // stored bytes stalls until the stores retire): the sum of its 16-bit words in network order.
  uint32_t ip_sum = 0x4500u + ip_total + 0x4000u + (uint32_t{a.ttl} << 8) + kIpProtoUdp + (a.src_ip >> 16) +
                    (a.src_ip & 0xffffu) + (a.dst_ip >> 16) + (a.dst_ip & 0xffffu);
  ip_sum = (ip_sum & 0xffffu) + (ip_sum >> 16);
  ip_sum = (ip_sum & 0xffffu) + (ip_sum >> 16);
  store_be<uint16_t>(ip + 10, static_cast<uint16_t>(~ip_sum & 0xffffu));

  std::byte* udp = ip + kIpv4Bytes;
  const auto udp_len = static_cast<uint16_t>(kUdpBytes + udp_payload_bytes);
  store_be<uint16_t>(udp, a.src_port);
  store_be<uint16_t>(udp + 2, a.dst_port);
  store_be<uint16_t>(udp + 4, udp_len);
  store_be<uint16_t>(udp + 6, 0);
  if (udp_payload.size() == udp_payload_bytes && !udp_payload.empty()) {
    // Pseudo-header sum, then the UDP header and payload.
    uint32_t sum = (a.src_ip >> 16) + (a.src_ip & 0xffff) + (a.dst_ip >> 16) + (a.dst_ip & 0xffff) +
                   kIpProtoUdp + udp_len;
    sum += a.src_port + a.dst_port + udp_len;
    uint16_t c = inet_checksum(udp_payload, sum);
    if (c == 0) c = 0xffff;  // 0 means "no checksum" in UDP over IPv4
    store_be<uint16_t>(udp + 6, c);
  }
}

namespace {
uint32_t udp_pseudo_sum(const Ipv4& ip) noexcept {
  return (ip.src >> 16) + (ip.src & 0xffffu) + (ip.dst >> 16) + (ip.dst & 0xffffu) + kIpProtoUdp +
         static_cast<uint32_t>(ip.l4_bytes);
}
}  // namespace

void seed_udp_checksum_offload(std::span<std::byte> l234) noexcept {
  std::byte* ip = l234.data() + kEthBytes;
  std::byte* udp = ip + kIpv4Bytes;
  const uint32_t src = load_be<uint32_t>(ip + 12);
  const uint32_t dst = load_be<uint32_t>(ip + 16);
  uint32_t sum = (src >> 16) + (src & 0xffffu) + (dst >> 16) + (dst & 0xffffu) + kIpProtoUdp + load_be<uint16_t>(udp + 4);
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  store_be<uint16_t>(udp + 6, static_cast<uint16_t>(sum));
}

bool udp_checksum_ok(std::span<const std::byte> frame, const Ipv4& ip) noexcept {
  const auto udp = frame.subspan(ip.l4_offset, ip.l4_bytes);
  if (load_be<uint16_t>(udp.data() + 6) == 0) return true;
  // The sum over everything, the checksum field included, is 0xffff (inet_checksum returns its complement).
  return inet_checksum(udp, udp_pseudo_sum(ip)) == 0;
}

void refresh_udp_checksum(std::span<std::byte> frame) noexcept {
  L2 l2;
  Ipv4 ip;
  if (parse_l2_into(frame, l2) || l2.ether_type != kEtherTypeIpv4 || parse_ipv4_into(frame, l2, false, ip) ||
      ip.protocol != kIpProtoUdp || ip.l4_bytes < kUdpBytes) {
    return;
  }
  std::byte* udp = frame.data() + ip.l4_offset;
  if (load_be<uint16_t>(udp + 6) == 0) return;
  store_be<uint16_t>(udp + 6, 0);
  uint16_t c = inet_checksum(std::span<const std::byte>(udp, ip.l4_bytes), udp_pseudo_sum(ip));
  if (c == 0) c = 0xffff;
  store_be<uint16_t>(udp + 6, c);
}

Expected<size_t, BuildError> build_phub_frame(const FlowAddrs& a, const Header& h, std::span<const std::byte> payload,
                                              std::span<std::byte> out) noexcept {
  constexpr size_t kL234 = kEthBytes + kIpv4Bytes + kUdpBytes;
  if (out.size() < kL234) return unexpected(BuildError::buffer_too_small);
  auto msg = build_message(h, payload, out.subspan(kL234));
  if (!msg) return unexpected(msg.error());
  write_eth_ipv4_udp(a, *msg, out, out.subspan(kL234, *msg));
  return kL234 + *msg;
}

}  // namespace phub::proto

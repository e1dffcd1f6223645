// ARP request/reply and ICMP echo handling for the server's own IPv4 addresses.
#include "phub/proto/arp_icmp.hpp"

#include <cstring>

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

constexpr uint16_t kArpHtypeEthernet = 1;

void write_arp(std::byte* p, ArpOp op, const MacAddr& eth_dst, const MacAddr& sha, uint32_t spa, const MacAddr& tha,
               uint32_t tpa) noexcept {
  std::memcpy(p, eth_dst.data(), 6);
  std::memcpy(p + 6, sha.data(), 6);
  store_be<uint16_t>(p + 12, kEtherTypeArp);
  std::byte* a = p + kEthBytes;
  store_be<uint16_t>(a, kArpHtypeEthernet);
  store_be<uint16_t>(a + 2, kEtherTypeIpv4);
  a[4] = std::byte{6};
  a[5] = std::byte{4};
  store_be<uint16_t>(a + 6, static_cast<uint16_t>(op));
  std::memcpy(a + 8, sha.data(), 6);
  store_be<uint32_t>(a + 14, spa);
  std::memcpy(a + 18, tha.data(), 6);
  store_be<uint32_t>(a + 24, tpa);
}

}  // namespace

Expected<Arp, ParseError> parse_arp(std::span<const std::byte> frame, const L2& l2) noexcept {
  if (l2.ether_type != kEtherTypeArp || frame.size() < l2.l3_offset + kArpBytes) {
    return unexpected(ParseError::arp_malformed);
  }
  const std::byte* a = frame.data() + l2.l3_offset;
  if (load_be<uint16_t>(a) != kArpHtypeEthernet || load_be<uint16_t>(a + 2) != kEtherTypeIpv4 ||
      static_cast<uint8_t>(a[4]) != 6 || static_cast<uint8_t>(a[5]) != 4) {
    return unexpected(ParseError::arp_malformed);
  }
  const uint16_t op = load_be<uint16_t>(a + 6);
  if (op != static_cast<uint16_t>(ArpOp::request) && op != static_cast<uint16_t>(ArpOp::reply)) {
    return unexpected(ParseError::arp_malformed);
  }
  Arp arp;
  arp.op = static_cast<ArpOp>(op);
  std::memcpy(arp.sender_mac.data(), a + 8, 6);
  arp.sender_ip = load_be<uint32_t>(a + 14);
  std::memcpy(arp.target_mac.data(), a + 18, 6);
  arp.target_ip = load_be<uint32_t>(a + 24);
  return arp;
}

size_t build_arp_reply(const Arp& req, const MacAddr& my_mac, uint32_t my_ip,
                       std::span<std::byte, kArpFrameBytes> out) noexcept {
  write_arp(out.data(), ArpOp::reply, req.sender_mac, my_mac, my_ip, req.sender_mac, req.sender_ip);
  return kArpFrameBytes;
}

size_t build_arp_request(const MacAddr& my_mac, uint32_t my_ip, uint32_t target_ip,
                         std::span<std::byte, kArpFrameBytes> out) noexcept {
  write_arp(out.data(), ArpOp::request, kBroadcastMac, my_mac, my_ip, MacAddr{}, target_ip);
  return kArpFrameBytes;
}

Expected<IcmpEcho, ParseError> parse_icmp_echo_request(std::span<const std::byte> frame, const Ipv4& ip) noexcept {
  constexpr size_t kIcmpHeaderBytes = 8;
  if (ip.protocol != kIpProtoIcmp || ip.l4_bytes < kIcmpHeaderBytes || ip.l4_offset + ip.l4_bytes > frame.size()) {
    return unexpected(ParseError::icmp_malformed);
  }
  const auto icmp = frame.subspan(ip.l4_offset, ip.l4_bytes);
  if (static_cast<uint8_t>(icmp[0]) != 8 || static_cast<uint8_t>(icmp[1]) != 0) {
    return unexpected(ParseError::icmp_malformed);
  }
  if (inet_checksum(icmp) != 0) return unexpected(ParseError::icmp_bad_checksum);
  IcmpEcho e;
  e.id = load_be<uint16_t>(icmp.data() + 4);
  e.seq = load_be<uint16_t>(icmp.data() + 6);
  e.icmp_offset = ip.l4_offset;
  e.icmp_bytes = ip.l4_bytes;
  return e;
}

void icmp_echo_reply_in_place(std::span<std::byte> frame, const L2& l2, const Ipv4& ip, const IcmpEcho& echo) noexcept {
  std::byte* p = frame.data();
  std::byte mac[6];
  std::memcpy(mac, p, 6);
  std::memcpy(p, p + 6, 6);
  std::memcpy(p + 6, mac, 6);

  std::byte* iph = p + l2.l3_offset;
  const size_t ihl_bytes = ip.l4_offset - l2.l3_offset;
  store_be<uint32_t>(iph + 12, ip.dst);
  store_be<uint32_t>(iph + 16, ip.src);
  iph[8] = std::byte{64};
  store_be<uint16_t>(iph + 10, 0);
  store_be<uint16_t>(iph + 10, inet_checksum(std::span<const std::byte>(iph, ihl_bytes)));

  std::byte* icmp = p + echo.icmp_offset;
  icmp[0] = std::byte{0};  // echo reply
  store_be<uint16_t>(icmp + 2, 0);
  store_be<uint16_t>(icmp + 2, inet_checksum(std::span<const std::byte>(icmp, echo.icmp_bytes)));
}

}  // namespace phub::proto

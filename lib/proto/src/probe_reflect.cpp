// The probe reflector: turning a probe_request datagram around into its probe_reply.
#include "phub/proto/probe_reflect.hpp"

#include <cstring>

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

constexpr size_t kIpTtlOffset = 8;
constexpr size_t kIpChecksumOffset = 10;
constexpr size_t kIpSrcOffset = 12;
constexpr size_t kIpDstOffset = 16;
constexpr size_t kUdpChecksumOffset = 6;

}  // namespace

Header probe_reply_header(const Header& request) noexcept {
  Header h = request;
  h.opcode = Opcode::probe_reply;
  h.flags = static_cast<uint16_t>(h.flags & ~flag::crc);
  h.crc32c = 0;
  return h;
}

void turn_around_udp_in_place(std::span<std::byte> frame, const L2& l2, const Ipv4& ip, const Udp& udp,
                              const MacAddr& my_mac) noexcept {
  std::byte* p = frame.data();
  std::memcpy(p, l2.src.data(), 6);
  std::memcpy(p + 6, my_mac.data(), 6);
  std::byte* iph = p + l2.l3_offset;
  iph[kIpTtlOffset] = std::byte{64};
  store_be<uint32_t>(iph + kIpSrcOffset, ip.dst);
  store_be<uint32_t>(iph + kIpDstOffset, ip.src);
  store_be<uint16_t>(iph + kIpChecksumOffset, 0);
  const size_t ip_header_bytes = ip.l4_offset - l2.l3_offset;
  store_be<uint16_t>(iph + kIpChecksumOffset, inet_checksum(std::span<const std::byte>(iph, ip_header_bytes)));
  std::byte* udph = p + ip.l4_offset;
  store_be<uint16_t>(udph, udp.dst_port);
  store_be<uint16_t>(udph + 2, udp.src_port);
  store_be<uint16_t>(udph + kUdpChecksumOffset, 0);
}

Header reflect_probe_in_place(std::span<std::byte> frame, const PhubFrame& f, const MacAddr& my_mac) noexcept {
  turn_around_udp_in_place(frame, f.l2, f.ip, f.udp, my_mac);
  const Header h = probe_reply_header(f.hdr);
  write_header(h, std::span<std::byte, kHeaderBytes>(frame.data() + f.udp.payload_offset, kHeaderBytes));
  return h;
}

}  // namespace phub::proto

// Tests of ARP replies and ICMP echo replies built for the server's own address.
#include <gtest/gtest.h>

#include <cstring>

#include "phub/base/bytes.hpp"
#include "phub/proto/arp_icmp.hpp"

namespace phub::proto {
namespace {

const MacAddr kServerMac{0x02, 0xaa, 0, 0, 0, 1};
const MacAddr kWorkerMac{0x02, 0xbb, 0, 0, 0, 2};
constexpr uint32_t kServerIp = 0xc6120001;
constexpr uint32_t kWorkerIp = 0xc6120002;

TEST(Arp, RequestThenReplyRoundTrip) {
  std::array<std::byte, kArpFrameBytes> req{};
  ASSERT_EQ(build_arp_request(kWorkerMac, kWorkerIp, kServerIp, req), kArpFrameBytes);
  auto l2 = parse_l2(req);
  ASSERT_TRUE(l2.has_value());
  auto arp = parse_arp(req, *l2);
  ASSERT_TRUE(arp.has_value());
  EXPECT_EQ(arp->op, ArpOp::request);
  EXPECT_EQ(arp->target_ip, kServerIp);
  EXPECT_EQ(arp->sender_mac, kWorkerMac);

  std::array<std::byte, kArpFrameBytes> rep{};
  ASSERT_EQ(build_arp_reply(*arp, kServerMac, kServerIp, rep), kArpFrameBytes);
  auto rl2 = parse_l2(rep);
  ASSERT_TRUE(rl2.has_value());
  EXPECT_EQ(rl2->dst, kWorkerMac);
  EXPECT_EQ(rl2->src, kServerMac);
  auto reply = parse_arp(rep, *rl2);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->op, ArpOp::reply);
  EXPECT_EQ(reply->sender_ip, kServerIp);
  EXPECT_EQ(reply->sender_mac, kServerMac);
  EXPECT_EQ(reply->target_ip, kWorkerIp);
}

TEST(Arp, RejectsMalformed) {
  std::array<std::byte, kArpFrameBytes> req{};
  (void)build_arp_request(kWorkerMac, kWorkerIp, kServerIp, req);
  auto l2 = parse_l2(req);
  ASSERT_TRUE(l2.has_value());
  for (size_t n = 0; n < req.size(); ++n) {
    std::vector<std::byte> cut(req.begin(), req.begin() + static_cast<std::ptrdiff_t>(n));
    auto cl2 = parse_l2(cut);
    if (cl2) {
      EXPECT_FALSE(parse_arp(cut, *cl2).has_value());
    }
  }
  auto bad = req;
  bad[kEthBytes + 5] = std::byte{6};  // plen
  EXPECT_FALSE(parse_arp(bad, *l2).has_value());
  bad = req;
  bad[kEthBytes + 7] = std::byte{9};  // op
  EXPECT_FALSE(parse_arp(bad, *l2).has_value());
}

std::vector<std::byte> echo_request(size_t data_bytes) {
  std::vector<std::byte> f(kEthBytes + kIpv4Bytes + 8 + data_bytes);
  FlowAddrs a;
  a.src_mac = kWorkerMac;
  a.dst_mac = kServerMac;
  a.src_ip = kWorkerIp;
  a.dst_ip = kServerIp;
  write_eth_ipv4_udp(a, 0, f);  // then turn the UDP header into ICMP
  std::byte* ip = f.data() + kEthBytes;
  store_be<uint16_t>(ip + 2, static_cast<uint16_t>(kIpv4Bytes + 8 + data_bytes));
  ip[9] = std::byte{kIpProtoIcmp};
  store_be<uint16_t>(ip + 10, 0);
  store_be<uint16_t>(ip + 10, inet_checksum(std::span<const std::byte>(ip, kIpv4Bytes)));
  std::byte* icmp = ip + kIpv4Bytes;
  std::memset(icmp, 0, 8);
  icmp[0] = std::byte{8};
  store_be<uint16_t>(icmp + 4, 0x1234);
  store_be<uint16_t>(icmp + 6, 7);
  for (size_t i = 0; i < data_bytes; ++i) icmp[8 + i] = static_cast<std::byte>(i);
  store_be<uint16_t>(icmp + 2, inet_checksum(std::span<const std::byte>(icmp, 8 + data_bytes)));
  return f;
}

TEST(Icmp, EchoReplyInPlace) {
  auto f = echo_request(56);
  auto l2 = parse_l2(f);
  ASSERT_TRUE(l2.has_value());
  auto ip = parse_ipv4(f, *l2);
  ASSERT_TRUE(ip.has_value());
  auto echo = parse_icmp_echo_request(f, *ip);
  ASSERT_TRUE(echo.has_value()) << parse_error_name(echo.error());
  EXPECT_EQ(echo->id, 0x1234);
  EXPECT_EQ(echo->seq, 7);

  icmp_echo_reply_in_place(f, *l2, *ip, *echo);
  auto rl2 = parse_l2(f);
  ASSERT_TRUE(rl2.has_value());
  EXPECT_EQ(rl2->dst, kWorkerMac);
  auto rip = parse_ipv4(f, *rl2);  // verifies the new IPv4 checksum
  ASSERT_TRUE(rip.has_value());
  EXPECT_EQ(rip->src, kServerIp);
  EXPECT_EQ(rip->dst, kWorkerIp);
  const auto icmp = std::span(f).subspan(rip->l4_offset, rip->l4_bytes);
  EXPECT_EQ(static_cast<uint8_t>(icmp[0]), 0);
  EXPECT_EQ(inet_checksum(icmp), 0);
  EXPECT_EQ(static_cast<uint8_t>(icmp[8 + 55]), 55);
}

TEST(Icmp, RejectsBadChecksumAndNonEcho) {
  auto f = echo_request(8);
  auto l2 = parse_l2(f);
  auto ip = parse_ipv4(f, *l2);
  ASSERT_TRUE(ip.has_value());
  auto bad = f;
  bad[ip->l4_offset + 9] ^= std::byte{0xff};
  auto e = parse_icmp_echo_request(bad, *ip);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error(), ParseError::icmp_bad_checksum);
  bad = f;
  bad[ip->l4_offset] = std::byte{0};  // an echo reply is not answered
  EXPECT_FALSE(parse_icmp_echo_request(bad, *ip).has_value());
}

}  // namespace
}  // namespace phub::proto

// Tests of Ethernet/IPv4/UDP framing: build/parse round trip, checksums, and every malformation.
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "phub/base/bytes.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

using test::bytes_of;
using test::sample_addrs;
using test::sample_header;

std::vector<std::byte> frame_with(uint16_t elems) {
  std::vector<std::byte> f(2048);
  auto n = build_phub_frame(sample_addrs(), sample_header(elems), bytes_of(elems * 4u), f);
  EXPECT_TRUE(n.has_value());
  f.resize(n.has_value() ? *n : 0);
  return f;
}

TEST(Frame, BuildThenParseGivesEveryLayer) {
  const auto f = frame_with(352);
  EXPECT_EQ(f.size(), kFrameHeadersBytes + 352 * 4);
  auto p = parse_phub_frame(f);
  ASSERT_TRUE(p.has_value()) << parse_error_name(p.error());
  const auto a = sample_addrs();
  EXPECT_EQ(p->l2.src, a.src_mac);
  EXPECT_EQ(p->l2.dst, a.dst_mac);
  EXPECT_EQ(p->ip.src, a.src_ip);
  EXPECT_EQ(p->ip.dst, a.dst_ip);
  EXPECT_EQ(p->udp.src_port, a.src_port);
  EXPECT_EQ(p->udp.dst_port, a.dst_port);
  EXPECT_EQ(p->udp.payload_offset, kEthBytes + kIpv4Bytes + kUdpBytes);
  EXPECT_EQ(p->hdr.elem_count, 352);
  EXPECT_EQ(p->payload.size(), 352u * 4);
  EXPECT_EQ(p->payload.data() - f.data(), static_cast<std::ptrdiff_t>(kFrameHeadersBytes));
  EXPECT_EQ(std::memcmp(p->payload.data(), bytes_of(352 * 4).data(), 352 * 4), 0);
}

TEST(Frame, IpHeaderChecksumHoldsForAnyAddressesTtlAndLength) {
  // The builder sums the header's fields arithmetically; the bytes it wrote must verify to zero.
  uint64_t x = 0x9e3779b97f4a7c15u;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int i = 0; i < 2000; ++i) {
    FlowAddrs a = sample_addrs();
    a.src_ip = i == 0 ? 0xffffffffu : static_cast<uint32_t>(next());
    a.dst_ip = i == 0 ? 0xffffffffu : static_cast<uint32_t>(next());
    a.ttl = i == 0 ? 255 : static_cast<uint8_t>(next());
    const size_t payload = i == 0 ? 65535 - kIpv4Bytes - kUdpBytes : next() % 9000;
    std::array<std::byte, kEthBytes + kIpv4Bytes + kUdpBytes> f{};
    write_eth_ipv4_udp(a, payload, f);
    ASSERT_EQ(inet_checksum(std::span<const std::byte>(f.data() + kEthBytes, kIpv4Bytes)), 0) << i;
  }
}

TEST(Frame, UdpChecksumVerifiesOverPseudoHeader) {
  const auto f = frame_with(10);
  const size_t l4 = kEthBytes + kIpv4Bytes;
  const size_t udp_len = f.size() - l4;
  const auto a = sample_addrs();
  uint32_t pseudo = (a.src_ip >> 16) + (a.src_ip & 0xffff) + (a.dst_ip >> 16) + (a.dst_ip & 0xffff) + kIpProtoUdp +
                    static_cast<uint32_t>(udp_len);
  EXPECT_NE(load_be<uint16_t>(f.data() + l4 + 6), 0);
  EXPECT_EQ(inet_checksum(std::span(f).subspan(l4), pseudo), 0);
}

// What a NIC with UDP checksum offload does: the one's-complement sum over the datagram, seeded with the
// pseudo-header sum in the checksum field, complemented; it must equal the checksum computed in software.
TEST(Frame, SeededPseudoHeaderCompletesToTheSoftwareChecksum) {
  for (uint16_t payload : {0, 1, 10, 333, 480}) {
    const auto want = frame_with(payload);
    auto seeded = want;
    const size_t l4 = kEthBytes + kIpv4Bytes;
    seed_udp_checksum_offload(std::span(seeded).first(l4 + kUdpBytes));
    const uint16_t seed = load_be<uint16_t>(seeded.data() + l4 + 6);
    EXPECT_NE(seed, 0u) << payload;
    uint16_t by_nic = inet_checksum(std::span<const std::byte>(seeded).subspan(l4));
    if (by_nic == 0) by_nic = 0xffff;
    EXPECT_EQ(by_nic, load_be<uint16_t>(want.data() + l4 + 6)) << payload;
    store_be<uint16_t>(seeded.data() + l4 + 6, by_nic);
    EXPECT_EQ(seeded, want) << payload;  // nothing else changed
  }
}

TEST(Frame, AcceptsEthernetPaddingAndVlanTag) {
  auto f = frame_with(1);
  f.resize(f.size() + 20, std::byte{0xee});  // trailing padding beyond the IPv4 total length
  auto p = parse_phub_frame(f);
  ASSERT_TRUE(p.has_value()) << parse_error_name(p.error());
  EXPECT_EQ(p->payload.size(), 4u);

  auto tagged = frame_with(2);
  const std::byte tag[4] = {std::byte{0x81}, std::byte{0x00}, std::byte{0x00}, std::byte{0x05}};
  tagged.insert(tagged.begin() + 12, tag, tag + 4);
  auto q = parse_phub_frame(tagged);
  ASSERT_TRUE(q.has_value()) << parse_error_name(q.error());
  EXPECT_EQ(q->l2.vlan_tci, 5);
  EXPECT_EQ(q->hdr.elem_count, 2);
}

struct FrameCorruption {
  const char* name;
  size_t offset;
  uint8_t value;
  ParseError expected;
};

class FrameRejects : public ::testing::TestWithParam<FrameCorruption> {};

TEST_P(FrameRejects, WithNamedReason) {
  auto f = frame_with(4);
  const auto& c = GetParam();
  f[c.offset] = std::byte{c.value};
  auto p = parse_phub_frame(f);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error(), c.expected) << parse_error_name(p.error());
}

INSTANTIATE_TEST_SUITE_P(
    Layers, FrameRejects,
    ::testing::Values(FrameCorruption{"ethertype", 12, 0x86, ParseError::not_ipv4},
                      FrameCorruption{"ip_version", 14, 0x65, ParseError::ipv4_bad_version},
                      FrameCorruption{"ip_ihl", 14, 0x44, ParseError::ipv4_bad_ihl},
                      FrameCorruption{"ip_total_len", 16, 0x7f, ParseError::ipv4_bad_total_length},
                      FrameCorruption{"ip_more_fragments", 20, 0x20, ParseError::ipv4_fragment},
                      FrameCorruption{"ip_checksum", 24, 0x00, ParseError::ipv4_bad_checksum},
                      FrameCorruption{"not_udp", 23, 6, ParseError::ipv4_bad_checksum},
                      FrameCorruption{"udp_len", 38, 0x7f, ParseError::udp_bad_length},
                      FrameCorruption{"phub_magic", 42, 0, ParseError::bad_magic}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Frame, NotUdpWhenChecksumIsNotVerified) {
  auto f = frame_with(4);
  f[23] = std::byte{6};  // TCP
  auto p = parse_phub_frame(f, /*verify_ip_checksum=*/false);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error(), ParseError::not_udp);
}

TEST(Frame, RejectsEveryTruncationWithoutReadingPastTheEnd) {
  const auto f = frame_with(64);
  for (size_t n = 0; n < f.size(); ++n) {
    // A fresh heap copy of exactly n bytes, so ASan sees any read beyond it.
    std::vector<std::byte> cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(parse_phub_frame(cut).has_value()) << "length " << n;
  }
}

TEST(Frame, InternetChecksumMatchesRfc1071Example) {
  // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (checksum 220d).
  const uint8_t words[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(inet_checksum(std::as_bytes(std::span(words))), 0x220d);
}

}  // namespace
}  // namespace phub::proto

namespace phub::proto {
namespace {

// A byte-at-a-time reference of RFC 1071 for the fast implementation.
uint16_t reference_checksum(std::span<const std::byte> d, uint32_t initial) {
  uint64_t sum = initial;
  for (size_t i = 0; i < d.size(); i += 2) {
    const uint32_t hi = static_cast<uint8_t>(d[i]);
    const uint32_t lo = i + 1 < d.size() ? static_cast<uint8_t>(d[i + 1]) : 0;
    sum += (hi << 8) | lo;
  }
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

TEST(Frame, InternetChecksumMatchesAReferenceForEveryLengthAndOffset) {
  std::vector<std::byte> buf(200);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::byte>((i * 97 + 13) & 0xff);
  for (size_t off = 0; off < 8; ++off) {
    for (size_t len = 0; off + len <= buf.size(); ++len) {
      const auto d = std::span<const std::byte>(buf).subspan(off, len);
      for (uint32_t initial : {0u, 0x1234u, 0x5ffffu}) {
        ASSERT_EQ(inet_checksum(d, initial), reference_checksum(d, initial)) << off << "+" << len;
      }
    }
  }
  std::vector<std::byte> ones(64, std::byte{0xff});
  EXPECT_EQ(inet_checksum(ones), reference_checksum(ones, 0));
}

}  // namespace
}  // namespace phub::proto

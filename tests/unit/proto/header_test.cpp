// Tests of the phub header: round trip, every rejection reason, and bounds.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

using test::bytes_of;
using test::sample_header;

std::vector<std::byte> message(const Header& h, size_t payload_bytes) {
  std::vector<std::byte> out(kHeaderBytes + payload_bytes);
  auto n = build_message(h, bytes_of(payload_bytes), out);
  EXPECT_TRUE(n.has_value());
  return out;
}

TEST(Header, RoundTripsEveryField) {
  Header h = sample_header(5, Dtype::bf16);
  h.flags = flag::retransmit | flag::mean;
  h.status = Status::ok;
  h.auth_tag = 0x0102030405060708ull;
  const auto msg = message(h, 10);
  auto parsed = parse_header(msg);
  ASSERT_TRUE(parsed.has_value()) << parse_error_name(parsed.error());
  h.payload_bytes = 10;
  EXPECT_EQ(*parsed, h);
}

// The server writes a result header once per segment and rewrites only rank and seq per worker.
TEST(Header, RecipientRewriteEqualsAWholeWrite) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    Header h = sample_header(static_cast<uint16_t>(rng() % 700), i % 2 ? Dtype::fp32 : Dtype::bf16);
    h.rank = static_cast<uint16_t>(rng());
    h.seq = static_cast<uint32_t>(rng());
    std::array<std::byte, kHeaderBytes> patched, whole;
    write_header(h, patched);
    h.rank = static_cast<uint16_t>(rng());
    h.seq = static_cast<uint32_t>(rng());
    write_header_recipient(h.rank, h.seq, patched);
    write_header(h, whole);
    ASSERT_EQ(patched, whole) << i;
  }
}

TEST(Header, FieldsAreBigEndianAtDocumentedOffsets) {
  Header h = sample_header(1);
  h.epoch = 0xbeef;
  const auto msg = message(h, 4);
  EXPECT_EQ(load_be<uint16_t>(msg.data() + 0), kMagic);
  EXPECT_EQ(static_cast<uint8_t>(msg[2]), kVersion);
  EXPECT_EQ(static_cast<uint8_t>(msg[3]), 1);  // push
  EXPECT_EQ(load_be<uint32_t>(msg.data() + 8), 0x01020304u);
  EXPECT_EQ(load_be<uint16_t>(msg.data() + 12), 7u);
  EXPECT_EQ(load_be<uint16_t>(msg.data() + 14), 4u);
  EXPECT_EQ(load_be<uint32_t>(msg.data() + 16), 0xa0b0c0d0u);
  EXPECT_EQ(load_be<uint32_t>(msg.data() + 20), 42u);
  EXPECT_EQ(load_be<uint32_t>(msg.data() + 24), 352u);
  EXPECT_EQ(load_be<uint16_t>(msg.data() + 28), 1u);
  EXPECT_EQ(load_be<uint16_t>(msg.data() + 30), 0xbeefu);
  EXPECT_EQ(load_be<uint32_t>(msg.data() + 36), 0x11223344u);
  EXPECT_EQ(load_be<uint32_t>(msg.data() + 48), 99u);
}

struct Corruption {
  const char* name;
  size_t offset;
  uint8_t value;
  ParseError expected;
};

class HeaderRejects : public ::testing::TestWithParam<Corruption> {};

TEST_P(HeaderRejects, WithNamedReason) {
  auto msg = message(sample_header(2), 8);
  const auto& c = GetParam();
  msg[c.offset] = std::byte{c.value};
  auto parsed = parse_header(msg);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error(), c.expected) << parse_error_name(parsed.error());
}

INSTANTIATE_TEST_SUITE_P(
    Fields, HeaderRejects,
    ::testing::Values(Corruption{"magic", 0, 0x51, ParseError::bad_magic},
                      Corruption{"version_2", 2, 2, ParseError::bad_version},
                      Corruption{"version_4", 2, 4, ParseError::bad_version},
                      Corruption{"opcode_zero", 3, 0, ParseError::bad_opcode},
                      Corruption{"opcode_high", 3, kOpcodeMax + 1, ParseError::bad_opcode},
                      Corruption{"opcode_255", 3, 255, ParseError::bad_opcode},
                      Corruption{"dtype", 6, 3, ParseError::bad_dtype},
                      Corruption{"status", 7, 200, ParseError::bad_status},
                      Corruption{"flags", 4, 0x80, ParseError::bad_flags},
                      Corruption{"reserved1", 53, 1, ParseError::reserved_nonzero},
                      Corruption{"payload_len_lie", 15, 9, ParseError::payload_length_mismatch},
                      Corruption{"elem_count_lie", 29, 3, ParseError::elem_count_mismatch}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Header, EpochsCompareAsSerialNumbers) {
  EXPECT_TRUE(epoch_newer(1, 0));
  EXPECT_TRUE(epoch_newer(0, 0xffff));  // wraps
  EXPECT_TRUE(epoch_newer(0x7fff, 0));
  EXPECT_FALSE(epoch_newer(0x8000, 0));  // half the space away: not newer
  EXPECT_FALSE(epoch_newer(5, 5));
  EXPECT_FALSE(epoch_newer(4, 5));
}

TEST(Header, RejectsEveryTruncation) {
  const auto msg = message(sample_header(4), 16);
  for (size_t n = 0; n < msg.size(); ++n) {
    // Truncating makes the header short or the payload disagree with payload_bytes.
    auto parsed = parse_header(std::span(msg.data(), n));
    EXPECT_FALSE(parsed.has_value()) << "length " << n;
  }
}

TEST(Header, PayloadOnlyWhereTheOpcodeCarriesOne) {
  Header h = sample_header(0);
  h.opcode = Opcode::rerequest;
  h.elem_count = 352;  // the requested range; no payload
  auto empty = message(h, 0);
  EXPECT_TRUE(parse_header(empty).has_value());

  std::vector<std::byte> with_payload(kHeaderBytes + 4);
  h.payload_bytes = 4;
  write_header(h, std::span(with_payload).first<kHeaderBytes>());
  auto parsed = parse_header(with_payload);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error(), ParseError::unexpected_payload);

  h.opcode = Opcode::probe_request;
  write_header(h, std::span(with_payload).first<kHeaderBytes>());
  EXPECT_TRUE(parse_header(with_payload).has_value());
}

TEST(Header, CrcFlagBindsThePayload) {
  Header h = sample_header(4);
  h.flags = flag::crc;
  auto msg = message(h, 16);
  ASSERT_TRUE(parse_header(msg).has_value());
  EXPECT_EQ(load_be<uint32_t>(msg.data() + kCrcOffset), crc32c(std::span(msg).subspan(kHeaderBytes)));
  msg[kHeaderBytes + 3] ^= std::byte{0x01};
  auto parsed = parse_header(msg);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error(), ParseError::bad_crc);
}

TEST(Header, BuildRefusesWhatDoesNotFit) {
  std::vector<std::byte> small(kHeaderBytes + 3);
  auto r = build_message(sample_header(1), bytes_of(4), small);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), BuildError::buffer_too_small);

  std::vector<std::byte> big(kHeaderBytes + 8);
  auto m = build_message(sample_header(3), bytes_of(8), big);  // 3 fp32 elements are 12 bytes, not 8
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error(), BuildError::elem_count_mismatch);
}

TEST(Header, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kParseErrorCount; ++i) names.insert(parse_error_name(static_cast<ParseError>(i)));
  EXPECT_EQ(names.size(), kParseErrorCount);
  for (uint8_t op = kOpcodeMin; op <= kOpcodeMax; ++op) {
    EXPECT_EQ(opcode_name(static_cast<Opcode>(op)) != "unknown", opcode_assigned(op)) << int(op);
  }
}

TEST(Header, SegmentElemsFitTheMtu) {
  EXPECT_EQ(segment_elems(1500, Dtype::fp32), 352u);
  EXPECT_EQ(segment_elems(1500, Dtype::bf16), 704u);
  EXPECT_EQ(segment_elems(9000, Dtype::fp32), 2224u);
  EXPECT_EQ(segment_elems(60, Dtype::fp32), 0u);
  for (uint32_t mtu = 576; mtu <= 9000; mtu += 97) {
    for (Dtype d : {Dtype::fp32, Dtype::fp16, Dtype::bf16}) {
      const uint32_t e = segment_elems(mtu, d);
      EXPECT_EQ(e % 16, 0u);
      EXPECT_LE(kIpv4Bytes + kUdpBytes + kHeaderBytes + e * dtype_bytes(d), mtu);
    }
  }
}

}  // namespace
}  // namespace phub::proto

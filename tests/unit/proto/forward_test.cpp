// Tests of the hub forwards (fwd_partial, fwd_result): their parse rules and the payload MAC.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

using test::bytes_of;

Header forward(Opcode op, uint16_t elems, Dtype d = Dtype::fp32) {
  Header h = test::sample_header(elems, d);
  h.opcode = op;
  h.rank = 1;  // the sending (partial) or addressed (result) hub's rack index
  h.aux = 0;
  return h;
}

struct Sealed {
  std::vector<std::byte> msg;
  std::span<std::byte, kHeaderBytes> wire() { return std::span<std::byte, kHeaderBytes>(msg.data(), kHeaderBytes); }
  std::span<const std::byte> payload() const { return std::span(msg).subspan(kHeaderBytes); }
};

Sealed sealed(const Header& h, const AuthKey& key) {
  Sealed s;
  const size_t bytes = h.elem_count * dtype_bytes(h.dtype);
  s.msg.resize(kHeaderBytes + bytes);
  EXPECT_TRUE(build_message(h, bytes_of(bytes, 5), s.msg).has_value());
  seal_fwd(key, fwd_payload_key(key), s.wire(), s.payload());
  return s;
}

TEST(Forward, EveryForwardOpcodeParsesWithItsPayload) {
  for (Opcode op : {Opcode::fwd_partial, Opcode::fwd_result, Opcode::fwd_init}) {
    const Header h = forward(op, 352);
    std::vector<std::byte> msg(kHeaderBytes + 352 * 4);
    ASSERT_TRUE(build_message(h, bytes_of(352 * 4), msg).has_value());
    auto p = parse_header(msg);
    ASSERT_TRUE(p.has_value()) << opcode_name(op) << ": " << parse_error_name(p.error());
    EXPECT_EQ(p->opcode, op);
    EXPECT_EQ(p->elem_count, 352u);
    EXPECT_TRUE(opcode_carries_elems(op));
    EXPECT_TRUE(opcode_is_forward(op));
  }
  EXPECT_EQ(opcode_name(Opcode::fwd_partial), "fwd_partial");
  EXPECT_EQ(opcode_name(Opcode::fwd_result), "fwd_result");
  EXPECT_EQ(opcode_name(Opcode::fwd_init), "fwd_init");
  EXPECT_FALSE(opcode_is_forward(Opcode::push));
  EXPECT_FALSE(opcode_is_forward(Opcode::result));
}

TEST(Forward, APartialIsFp32AndAResultHasTheJobsDtype) {
  std::vector<std::byte> msg(kHeaderBytes + 16 * 2);
  ASSERT_TRUE(build_message(forward(Opcode::fwd_partial, 16, Dtype::bf16), bytes_of(32), msg).has_value());
  auto p = parse_header(msg);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error(), ParseError::bad_forward);
  ASSERT_TRUE(build_message(forward(Opcode::fwd_result, 16, Dtype::bf16), bytes_of(32), msg).has_value());
  EXPECT_TRUE(parse_header(msg).has_value());
}

// A ps hub forwards rank 0's init as it came (any dtype), or asks for a chunk's weights with no elements.
TEST(Forward, AnInitForwardCarriesAnyDtypeOrNoElements) {
  std::vector<std::byte> msg(kHeaderBytes + 32);
  ASSERT_TRUE(build_message(forward(Opcode::fwd_init, 16, Dtype::bf16), bytes_of(32), msg).has_value());
  auto p = parse_header(msg);
  ASSERT_TRUE(p.has_value()) << parse_error_name(p.error());
  EXPECT_EQ(p->dtype, Dtype::bf16);
  std::vector<std::byte> request(kHeaderBytes);
  ASSERT_TRUE(build_message(forward(Opcode::fwd_init, 0), {}, request).has_value());
  p = parse_header(request);
  ASSERT_TRUE(p.has_value()) << parse_error_name(p.error());
  EXPECT_EQ(p->elem_count, 0u);
  store_be<uint16_t>(request.data() + 28, 1);  // one element named, none carried
  p = parse_header(request);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error(), ParseError::elem_count_mismatch);
}

TEST(Forward, TheCrcFlagIsRefused) {
  for (Opcode op : {Opcode::fwd_partial, Opcode::fwd_result, Opcode::fwd_init}) {
    Header h = forward(op, 8);
    h.flags = flag::crc;
    std::vector<std::byte> msg(kHeaderBytes + 32);
    ASSERT_TRUE(build_message(h, bytes_of(32), msg).has_value());  // a right CRC: still refused
    auto p = parse_header(msg);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error(), ParseError::bad_forward) << opcode_name(op);
  }
}

TEST(Forward, ElementCountMustMatchThePayload) {
  std::vector<std::byte> msg(kHeaderBytes + 32);
  ASSERT_TRUE(build_message(forward(Opcode::fwd_partial, 8), bytes_of(32), msg).has_value());
  store_be<uint16_t>(msg.data() + 28, 7);  // elem_count
  auto p = parse_header(msg);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error(), ParseError::elem_count_mismatch);
}

TEST(Forward, ASealedForwardVerifies) {
  const AuthKey key = derive_key("job secret", 1);
  for (Opcode op : {Opcode::fwd_partial, Opcode::fwd_result}) {
    Sealed s = sealed(forward(op, 352), key);
    EXPECT_TRUE(parse_header(s.msg).has_value());
    EXPECT_TRUE(verify_fwd(key, fwd_payload_key(key), s.wire(), s.payload())) << opcode_name(op);
    EXPECT_TRUE(verify_header(key, s.wire()));
  }
}

TEST(Forward, EveryPayloadBitIsCovered) {
  const AuthKey key = derive_key("job secret", 1);
  const AuthKey pk = fwd_payload_key(key);
  Sealed s = sealed(forward(Opcode::fwd_partial, 16), key);
  for (size_t i = kHeaderBytes; i < s.msg.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      s.msg[i] ^= std::byte{static_cast<uint8_t>(1u << bit)};
      EXPECT_FALSE(verify_fwd(key, pk, s.wire(), s.payload())) << "byte " << i << " bit " << bit;
      s.msg[i] ^= std::byte{static_cast<uint8_t>(1u << bit)};
    }
  }
  EXPECT_TRUE(verify_fwd(key, pk, s.wire(), s.payload()));
}

TEST(Forward, HeaderFieldsAndTheMacFieldsAreCovered) {
  const AuthKey key = derive_key("job secret", 1);
  const AuthKey pk = fwd_payload_key(key);
  Sealed s = sealed(forward(Opcode::fwd_result, 16), key);
  for (size_t off : {size_t{12}, size_t{16}, size_t{20}, size_t{24}, size_t{30}, kCrcOffset, kAuxOffset,
                     kAuxOffset + 3}) {
    s.msg[off] ^= std::byte{1};
    EXPECT_FALSE(verify_fwd(key, pk, s.wire(), s.payload())) << "offset " << off;
    s.msg[off] ^= std::byte{1};
  }
}

// An attacker who changes the payload and writes a matching MAC into the header without the key fails on
// the header tag; one who replays a valid header over another payload fails on the MAC.
TEST(Forward, AReplayedHeaderOverAnotherPayloadFails) {
  const AuthKey key = derive_key("job secret", 1);
  const AuthKey pk = fwd_payload_key(key);
  Sealed a = sealed(forward(Opcode::fwd_partial, 16), key);
  Sealed b = a;
  std::memcpy(b.msg.data() + kHeaderBytes, bytes_of(64, 99).data(), 64);
  EXPECT_FALSE(verify_fwd(key, pk, b.wire(), b.payload()));
  // Rewrite b's MAC fields as seal_fwd would, but without re-signing: the tag no longer matches.
  const uint64_t mac = siphash24(pk, b.payload());
  store_be<uint32_t>(b.msg.data() + kCrcOffset, static_cast<uint32_t>(mac >> 32));
  store_be<uint32_t>(b.msg.data() + kAuxOffset, static_cast<uint32_t>(mac));
  EXPECT_FALSE(verify_fwd(key, pk, b.wire(), b.payload()));
}

TEST(Forward, AnotherJobsKeyFails) {
  const AuthKey key = derive_key("job secret", 1);
  const AuthKey other = derive_key("another job", 1);
  Sealed s = sealed(forward(Opcode::fwd_partial, 16), key);
  EXPECT_FALSE(verify_fwd(other, fwd_payload_key(other), s.wire(), s.payload()));
  // The payload key is not the header key: a MAC made with the job key itself does not verify.
  EXPECT_NE(fwd_payload_key(key), key);
  seal_fwd(key, key, s.wire(), s.payload());
  EXPECT_FALSE(verify_fwd(key, fwd_payload_key(key), s.wire(), s.payload()));
}

}  // namespace
}  // namespace phub::proto

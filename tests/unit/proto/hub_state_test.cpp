// Tests of the hub_state message (opcode 14): its payload layout, the parse rules and its payload MAC.
#include <gtest/gtest.h>

#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/hub_state.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

HubState sample_state() {
  HubState s;
  for (size_t i = 0; i < kHubFingerprintParts; ++i) s.fingerprint[i] = 0x1111111111111111ull * (i + 1);
  s.nonce = 0xa1b2c3d4;
  s.echo = 0x01020304;
  s.rank0_holder = 777;
  s.first_round = 12;
  s.flags = hub_state_flag::fresh_weights;
  s.life = 0x0123456789abcdefull;
  return s;
}

std::vector<std::byte> message(const HubState& s, uint16_t epoch = 3) {
  Header h;
  h.opcode = Opcode::hub_state;
  h.job_id = 9;
  h.rank = 1;
  h.epoch = epoch;
  std::vector<std::byte> payload(kHubStateBytes);
  write_hub_state(s, std::span<std::byte, kHubStateBytes>(payload.data(), kHubStateBytes));
  std::vector<std::byte> msg(kHeaderBytes + kHubStateBytes);
  EXPECT_TRUE(build_message(h, payload, msg).has_value());
  return msg;
}

TEST(HubState, RoundTripsInItsDocumentedLayout) {
  const HubState s = sample_state();
  std::vector<std::byte> p(kHubStateBytes);
  write_hub_state(s, std::span<std::byte, kHubStateBytes>(p.data(), kHubStateBytes));
  EXPECT_EQ(load_be<uint64_t>(p.data() + 8), 0x2222222222222222ull);  // the second component
  EXPECT_EQ(load_be<uint32_t>(p.data() + 40), s.nonce);
  EXPECT_EQ(load_be<uint32_t>(p.data() + 44), s.echo);
  EXPECT_EQ(load_be<uint32_t>(p.data() + 48), 777u);
  EXPECT_EQ(load_be<uint32_t>(p.data() + 52), 12u);
  EXPECT_EQ(load_be<uint32_t>(p.data() + 56), 1u);
  EXPECT_EQ(load_be<uint32_t>(p.data() + 60), 0u);
  EXPECT_EQ(load_be<uint64_t>(p.data() + 64), 0x0123456789abcdefull);
  auto back = parse_hub_state(p);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, s);
}

TEST(HubState, TheHeaderParsesWithExactlyItsPayload) {
  auto msg = message(sample_state());
  auto h = parse_header(msg);
  ASSERT_TRUE(h.has_value()) << parse_error_name(h.error());
  EXPECT_EQ(h->opcode, Opcode::hub_state);
  EXPECT_EQ(h->epoch, 3);
  EXPECT_EQ(opcode_name(Opcode::hub_state), "hub_state");
  EXPECT_TRUE(opcode_is_hub(Opcode::hub_state));
  EXPECT_FALSE(opcode_is_forward(Opcode::hub_state));
  EXPECT_FALSE(opcode_carries_elems(Opcode::hub_state));
  msg.push_back(std::byte{0});  // one byte more, with payload_bytes following it
  store_be<uint16_t>(msg.data() + 14, kHubStateBytes + 1);
  EXPECT_EQ(parse_header(msg).error(), ParseError::bad_hub_state);
  std::vector<std::byte> empty(kHeaderBytes);
  Header bare;
  bare.opcode = Opcode::hub_state;
  ASSERT_TRUE(build_message(bare, {}, empty).has_value());
  EXPECT_EQ(parse_header(empty).error(), ParseError::bad_hub_state);
}

TEST(HubState, ANullNonceUnknownFlagsAndReservedBitsAreRefused) {
  HubState s = sample_state();
  s.nonce = 0;
  EXPECT_EQ(parse_header(message(s)).error(), ParseError::bad_hub_state);
  s = sample_state();
  s.life = 0;
  EXPECT_EQ(parse_header(message(s)).error(), ParseError::bad_hub_state);
  s = sample_state();
  s.flags = 2;
  EXPECT_EQ(parse_header(message(s)).error(), ParseError::bad_hub_state);
  auto msg = message(sample_state());
  msg[kHeaderBytes + 63] = std::byte{1};
  EXPECT_EQ(parse_header(msg).error(), ParseError::bad_hub_state);
  auto crc = message(sample_state());
  store_be<uint16_t>(crc.data() + 4, flag::crc);
  EXPECT_EQ(parse_header(crc).error(), ParseError::bad_forward);
}

TEST(HubState, ItsPayloadIsSealedLikeAForwards) {
  const AuthKey key = derive_key("hub-state", 9);
  auto msg = message(sample_state());
  auto wire = std::span<std::byte, kHeaderBytes>(msg.data(), kHeaderBytes);
  seal_fwd(key, fwd_payload_key(key), wire, std::span(msg).subspan(kHeaderBytes));
  EXPECT_TRUE(verify_fwd(key, fwd_payload_key(key), wire, std::span(msg).subspan(kHeaderBytes)));
  EXPECT_TRUE(parse_header(msg).has_value());
  msg[kHeaderBytes + 48] ^= std::byte{1};  // another rank 0 holder
  EXPECT_FALSE(verify_fwd(key, fwd_payload_key(key), wire, std::span(msg).subspan(kHeaderBytes)));
}

}  // namespace
}  // namespace phub::proto

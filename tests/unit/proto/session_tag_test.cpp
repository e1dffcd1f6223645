// Tests of session packet tags and payload MACs (session_tag.hpp): what each binds, and that they are
// SipHash-2-4 of the documented input.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

using Wire = std::array<std::byte, kHeaderBytes>;

SessionKeys sample_keys(uint8_t nonce_byte = 1) {
  SessionContext c;
  c.rank = 7;
  c.incarnation = 42;
  c.worker_nonce.fill(std::byte{nonce_byte});
  c.server_nonce.fill(std::byte{0x5a});
  return derive_session_keys(derive_key("a-job-secret-of-24-bytes", 1), c);
}

constexpr ReplyAddress kReply{0xc6120065, 50003};  // 198.18.0.101:50003
constexpr uint64_t kSeq = 0x00000003fffffff0ull;

Wire sealed_sample(const AuthKey& key, ReplyAddress reply = kReply, uint64_t seq = kSeq) {
  Wire wire{};
  write_header(test::sample_header(), wire);
  seal_session(key, wire, reply, seq);
  return wire;
}

TEST(SessionTag, SealedVerifiesAndEveryHeaderBitFlipBreaksIt) {
  const AuthKey key = sample_keys().worker_tag;
  const Wire wire = sealed_sample(key);
  EXPECT_TRUE(verify_session(key, wire, kReply, kSeq));
  for (size_t bit = 0; bit < kHeaderBytes * 8; ++bit) {
    Wire flipped = wire;
    flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_FALSE(verify_session(key, flipped, kReply, kSeq)) << "bit " << bit;
  }
}

TEST(SessionTag, SealWritesTheLowHalfOfTheSequenceNumberIntoSeq) {
  const AuthKey key = sample_keys().worker_tag;
  const Wire wire = sealed_sample(key);
  EXPECT_EQ(load_be<uint32_t>(wire.data() + kSeqOffset), 0xfffffff0u);
  // A verifier that names another low half fails even with the right high half.
  EXPECT_FALSE(verify_session(key, wire, kReply, kSeq + 1));
}

TEST(SessionTag, BindsTheReplyAddress) {
  const AuthKey key = sample_keys().worker_tag;
  const Wire wire = sealed_sample(key);
  EXPECT_FALSE(verify_session(key, wire, ReplyAddress{kReply.ipv4 + 1, kReply.udp_port}, kSeq));
  EXPECT_FALSE(verify_session(key, wire, ReplyAddress{kReply.ipv4, static_cast<uint16_t>(kReply.udp_port + 1)}, kSeq));
  EXPECT_FALSE(verify_session(key, wire, ReplyAddress{kReply.ipv4 ^ 0x80000000u, kReply.udp_port}, kSeq));
}

TEST(SessionTag, BindsTheHighHalfOfTheSequenceNumber) {
  const AuthKey key = sample_keys().worker_tag;
  const Wire wire = sealed_sample(key);
  // Same low half, so the header is byte for byte the same; only the inferred high half differs.
  for (uint64_t high : {0ull, 2ull, 4ull, 0x80000003ull}) {
    EXPECT_FALSE(verify_session(key, wire, kReply, (high << 32) | seq_low(kSeq))) << high;
  }
}

TEST(SessionTag, NoOtherKeyVerifiesIt) {
  const SessionKeys keys = sample_keys();
  const Wire wire = sealed_sample(keys.worker_tag);
  // The other direction, the payload keys, another session of the same rank, and the job key's header tag.
  EXPECT_FALSE(verify_session(keys.server_tag, wire, kReply, kSeq));
  EXPECT_FALSE(verify_session(keys.worker_mac, wire, kReply, kSeq));
  EXPECT_FALSE(verify_session(sample_keys(2).worker_tag, wire, kReply, kSeq));
  const AuthKey job_key = derive_key("a-job-secret-of-24-bytes", 1);
  EXPECT_FALSE(verify_header(job_key, wire));
  Wire job_signed = wire;
  sign_header(job_key, job_signed);
  EXPECT_FALSE(verify_session(job_key, job_signed, kReply, kSeq));
}

TEST(SessionTag, IsSipHashOfTheHeaderTheAddressAndTheHighHalf) {
  const AuthKey key = sample_keys().server_tag;
  const Wire wire = sealed_sample(key);
  std::array<std::byte, 64> in{};
  std::memcpy(in.data(), wire.data(), kHeaderBytes);
  std::memset(in.data() + kAuthTagOffset, 0, 8);
  store_be<uint32_t>(in.data() + 54, kReply.ipv4);
  store_be<uint16_t>(in.data() + 58, kReply.udp_port);
  store_be<uint32_t>(in.data() + 60, seq_high(kSeq));
  EXPECT_EQ(load_be<uint64_t>(wire.data() + kAuthTagOffset), siphash24(key, in));
  EXPECT_EQ(session_tag(key, wire, kReply, seq_high(kSeq)), siphash24(key, in));
}

TEST(PayloadMac, BindsThePayloadTheSequenceNumberAndTheKey) {
  const SessionKeys keys = sample_keys();
  auto payload = test::bytes_of(1408, 3);
  const uint64_t mac = session_payload_mac(keys.worker_mac, kSeq, payload);
  EXPECT_EQ(mac, session_payload_mac(keys.worker_mac, kSeq, payload));
  EXPECT_NE(mac, session_payload_mac(keys.worker_mac, kSeq + 1, payload));
  EXPECT_NE(mac, session_payload_mac(keys.worker_mac, kSeq + (1ull << 32), payload));
  EXPECT_NE(mac, session_payload_mac(keys.server_mac, kSeq, payload));
  EXPECT_NE(mac, session_payload_mac(keys.worker_mac, kSeq, std::span(payload).first(1404)));
  // One flipped bit anywhere in the payload (the attack suite's altered element) changes it.
  for (size_t bit = 0; bit < payload.size() * 8; bit += 61) {
    auto altered = payload;
    altered[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    ASSERT_NE(mac, session_payload_mac(keys.worker_mac, kSeq, altered)) << "bit " << bit;
  }
  // The documented input: seq big-endian, then the payload.
  std::vector<std::byte> in(8 + payload.size());
  store_be<uint64_t>(in.data(), kSeq);
  std::memcpy(in.data() + 8, payload.data(), payload.size());
  EXPECT_EQ(mac, siphash24(keys.worker_mac, in));
}

}  // namespace
}  // namespace phub::proto

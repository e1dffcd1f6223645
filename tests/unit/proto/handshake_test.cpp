// Tests of the session handshake's payloads and tags (handshake.hpp): exact forms, and that only a join
// and a joined sealed under the job's handshake key, and for a joined only the one that echoes the
// worker's own nonce, are accepted.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/handshake.hpp"

namespace phub::proto {
namespace {

const AuthKey kJobKey = derive_key("a-job-secret-of-24-bytes", 3);

SessionNonce nonce_of(uint8_t first) {
  SessionNonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::byte>(first + i);
  return n;
}

JoinedPayload sample_joined() {
  return JoinedPayload{nonce_of(0x10), nonce_of(0x80), ReplyAddress{0xc6120065, 50003}};
}

// A whole message: a header of `op` whose payload_bytes fits, then the payload, sealed under `key`.
struct Message {
  std::array<std::byte, kHeaderBytes> wire{};
  std::vector<std::byte> payload;
};

Message sealed(Opcode op, std::vector<std::byte> payload, const AuthKey& key) {
  Message m;
  Header h;
  h.opcode = op;
  h.job_id = 3;
  h.rank = 2;
  h.aux = 0x5eed;  // incarnation
  h.epoch = 4;
  h.seq = 9;
  h.payload_bytes = static_cast<uint16_t>(payload.size());
  write_header(h, m.wire);
  m.payload = std::move(payload);
  seal_handshake(key, m.wire, m.payload);
  return m;
}

std::vector<std::byte> join_bytes(const JoinPayload& p) {
  std::vector<std::byte> out(kJoinPayloadBytes);
  write_join_payload(p, std::span(out).first<kJoinPayloadBytes>());
  return out;
}

std::vector<std::byte> joined_bytes(const JoinedPayload& p) {
  std::vector<std::byte> out(kJoinedPayloadBytes);
  write_joined_payload(p, std::span(out).first<kJoinedPayloadBytes>());
  return out;
}

TEST(Handshake, PayloadsRoundTripInTheDocumentedLayout) {
  const JoinPayload join{nonce_of(0x21)};
  const auto jb = join_bytes(join);
  EXPECT_EQ(jb[0], std::byte{kHandshakeVersion});
  EXPECT_EQ(jb[4], std::byte{0x21});
  EXPECT_EQ(jb[19], std::byte{0x30});
  for (size_t i = 20; i < kJoinPayloadBytes; ++i) EXPECT_EQ(jb[i], std::byte{0}) << "padding " << i;
  EXPECT_EQ(parse_join_payload(jb), join);

  const JoinedPayload joined = sample_joined();
  const auto b = joined_bytes(joined);
  EXPECT_EQ(b[0], std::byte{kHandshakeVersion});
  EXPECT_EQ(b[4], std::byte{0x10});
  EXPECT_EQ(b[20], std::byte{0x80});
  EXPECT_EQ(load_be<uint32_t>(b.data() + 36), 0xc6120065u);
  EXPECT_EQ(load_be<uint16_t>(b.data() + 40), 50003);
  EXPECT_EQ(parse_joined_payload(b), joined);
}

TEST(Handshake, AConfirmCarriesTheChallengeAsVersion2) {
  const JoinPayload confirm{nonce_of(0x21), true, nonce_of(0x90)};
  const auto b = join_bytes(confirm);
  EXPECT_EQ(b[0], std::byte{kConfirmVersion});
  EXPECT_EQ(b[4], std::byte{0x21});
  EXPECT_EQ(b[20], std::byte{0x90});
  EXPECT_EQ(b[35], std::byte{0x9f});
  for (size_t i = 36; i < kJoinPayloadBytes; ++i) EXPECT_EQ(b[i], std::byte{0}) << "padding " << i;
  EXPECT_EQ(parse_join_payload(b), confirm);
  // A confirm without a challenge, and a first join with one, are refused.
  auto zero = b;
  std::fill(zero.begin() + 20, zero.begin() + 36, std::byte{0});
  EXPECT_FALSE(parse_join_payload(zero).has_value());
  auto first_with = b;
  first_with[0] = std::byte{kHandshakeVersion};
  EXPECT_FALSE(parse_join_payload(first_with).has_value());
  auto version3 = b;
  version3[0] = std::byte{3};
  EXPECT_FALSE(parse_join_payload(version3).has_value());
}

TEST(Handshake, TheChallengeIsBoundToEveryFieldOfItsContextAndToTheServersKey) {
  const ChallengeKey key = draw_challenge_key();
  ChallengeContext c;
  c.job_id = 7;
  c.lcore_index = 1;
  c.rank = 3;
  c.epoch = 12;
  c.incarnation = 0xabcdef;
  c.source = ReplyAddress{0xc6120065, 50003};
  c.worker_nonce = nonce_of(0x40);
  const SessionNonce base = join_challenge(key, c);
  EXPECT_EQ(join_challenge(key, c), base) << "the server keeps nothing: the same context gives the same challenge";
  EXPECT_NE(base, SessionNonce{});
  auto differs = [&](auto edit) {
    ChallengeContext d = c;
    edit(d);
    return join_challenge(key, d) != base;
  };
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.job_id = 8; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.lcore_index = 0; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.rank = 2; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.epoch = 13; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.incarnation = 1; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.source.ipv4 ^= 1; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.source.udp_port ^= 1; }));
  EXPECT_TRUE(differs([](ChallengeContext& d) { d.worker_nonce[15] ^= std::byte{1}; }));
  EXPECT_NE(join_challenge(draw_challenge_key(), c), base) << "another server run";
}

TEST(Handshake, AJoinIsNoShorterThanItsAnswer) {
  // Before a source has proven its address the server sends it no more bytes than it received: the joined
  // that answers a join (same header) must not be longer.
  EXPECT_GE(kJoinPayloadBytes, kJoinedPayloadBytes);
}

TEST(Handshake, PayloadsOfEveryOtherLengthAreRefused) {
  auto jb = join_bytes(JoinPayload{nonce_of(1)});
  auto b = joined_bytes(sample_joined());
  for (size_t n = 0; n <= 64; ++n) {
    std::vector<std::byte> buf(n, std::byte{0x01});
    std::copy_n(b.begin(), std::min(n, b.size()), buf.begin());
    if (n != kJoinPayloadBytes) {
      EXPECT_FALSE(parse_join_payload(buf).has_value()) << n;
    }
    if (n != kJoinedPayloadBytes) {
      EXPECT_FALSE(parse_joined_payload(buf).has_value()) << n;
    }
  }
  EXPECT_TRUE(parse_join_payload(jb).has_value());
  EXPECT_TRUE(parse_joined_payload(b).has_value());
}

TEST(Handshake, WrongVersionReservedBytesZeroNoncesOrAddressAreRefused) {
  auto bad_join = [](size_t at, std::byte v) {
    auto jb = join_bytes(JoinPayload{nonce_of(1)});
    jb[at] = v;
    return parse_join_payload(jb).has_value();
  };
  EXPECT_FALSE(bad_join(0, std::byte{2}));
  EXPECT_FALSE(bad_join(0, std::byte{0}));
  for (size_t at : {1u, 2u, 3u, 20u, 31u, 43u}) EXPECT_FALSE(bad_join(at, std::byte{1})) << at;
  EXPECT_FALSE(parse_join_payload(join_bytes(JoinPayload{})).has_value());

  auto bad_joined = [](size_t at, std::byte v) {
    auto b = joined_bytes(sample_joined());
    b[at] = v;
    return parse_joined_payload(b).has_value();
  };
  EXPECT_FALSE(bad_joined(0, std::byte{2}));
  for (size_t at : {2u, 3u, 42u, 43u}) EXPECT_FALSE(bad_joined(at, std::byte{1})) << at;
  // The options byte: unknown bits, and a payload MAC without a session, are refused.
  EXPECT_FALSE(bad_joined(1, std::byte{0x10}));
  EXPECT_TRUE(bad_joined(1, std::byte{session_option::confirmed}));
  EXPECT_FALSE(bad_joined(1, std::byte{session_option::payload_mac}));
  EXPECT_TRUE(bad_joined(1, std::byte{session_option::session}));
  EXPECT_TRUE(bad_joined(1, std::byte{session_option::session | session_option::payload_mac}));
  JoinedPayload p = sample_joined();
  p.worker_nonce = {};
  EXPECT_FALSE(parse_joined_payload(joined_bytes(p)).has_value());
  p = sample_joined();
  p.server_nonce = {};
  EXPECT_FALSE(parse_joined_payload(joined_bytes(p)).has_value());
  p = sample_joined();
  p.reply.ipv4 = 0;
  EXPECT_FALSE(parse_joined_payload(joined_bytes(p)).has_value());
  p = sample_joined();
  p.reply.udp_port = 0;
  EXPECT_FALSE(parse_joined_payload(joined_bytes(p)).has_value());
  p = sample_joined();
  p.options = session_option::session | session_option::payload_mac;
  EXPECT_EQ(parse_joined_payload(joined_bytes(p)), p);  // the options travel
}

TEST(Handshake, ARedirectIsAloneAndCarriesNoChallenge) {
  // A redirect (session_option::redirect) names no challenge: its server nonce is all zero, and it is the only
  // kind of joined whose server nonce may be. With any other option it is refused.
  JoinedPayload r = sample_joined();
  r.options = session_option::redirect;
  r.server_nonce = {};
  EXPECT_EQ(parse_joined_payload(joined_bytes(r)), r);
  JoinedPayload with_nonce = r;
  with_nonce.server_nonce = nonce_of(9);
  EXPECT_FALSE(parse_joined_payload(joined_bytes(with_nonce)).has_value());
  for (uint8_t other : {session_option::session, session_option::confirmed,
                        static_cast<uint8_t>(session_option::session | session_option::payload_mac)}) {
    JoinedPayload x = r;
    x.options = static_cast<uint8_t>(session_option::redirect | other);
    EXPECT_FALSE(parse_joined_payload(joined_bytes(x)).has_value()) << int{other};
    x.server_nonce = nonce_of(9);
    EXPECT_FALSE(parse_joined_payload(joined_bytes(x)).has_value()) << int{other};
  }
  // Sealed, it opens only for the join whose nonce it echoes, as any joined.
  const AuthKey key = handshake_key(kJobKey);
  const Message m = sealed(Opcode::joined, joined_bytes(r), key);
  EXPECT_EQ(accept_joined(key, m.wire, m.payload, r.worker_nonce), r);
  EXPECT_FALSE(accept_joined(key, m.wire, m.payload, nonce_of(0x77)).has_value());
}

TEST(Handshake, TheServerAcceptsOnlyASealedJoin) {
  const AuthKey key = handshake_key(kJobKey);
  const JoinPayload join{nonce_of(0x40)};
  const Message m = sealed(Opcode::join, join_bytes(join), key);
  EXPECT_EQ(accept_join(key, m.wire, m.payload), join);
  // Without the key, under the job key itself, or as the job's plain header tag: refused.
  EXPECT_FALSE(accept_join(handshake_key(derive_key("another-secret-of-24-byte", 3)), m.wire, m.payload));
  const Message under_job_key = sealed(Opcode::join, join_bytes(join), kJobKey);
  EXPECT_FALSE(accept_join(key, under_job_key.wire, under_job_key.payload));
  Message job_signed = m;
  sign_header(kJobKey, job_signed.wire);
  EXPECT_FALSE(accept_join(key, job_signed.wire, job_signed.payload));
  // Any bit of header or payload altered: refused.
  for (size_t bit = 0; bit < (kHeaderBytes + kJoinPayloadBytes) * 8; ++bit) {
    Message x = m;
    std::byte& b = bit / 8 < kHeaderBytes ? x.wire[bit / 8] : x.payload[bit / 8 - kHeaderBytes];
    b ^= static_cast<std::byte>(1u << (bit % 8));
    ASSERT_FALSE(accept_join(key, x.wire, x.payload).has_value()) << "bit " << bit;
  }
  // Sealed right but another opcode, or a payload_bytes that is not the payload's length: refused.
  const Message as_leave = sealed(Opcode::leave, join_bytes(join), key);
  EXPECT_FALSE(accept_join(key, as_leave.wire, as_leave.payload));
  Message short_payload = m;
  short_payload.payload.pop_back();
  seal_handshake(key, short_payload.wire, short_payload.payload);
  EXPECT_FALSE(accept_join(key, short_payload.wire, short_payload.payload));
  // A sealed join whose payload is malformed (zero nonce) passes the tag but not the form.
  const Message zero_nonce = sealed(Opcode::join, join_bytes(JoinPayload{}), key);
  EXPECT_TRUE(verify_handshake(key, zero_nonce.wire, zero_nonce.payload));
  EXPECT_FALSE(accept_join(key, zero_nonce.wire, zero_nonce.payload));
}

TEST(Handshake, TheWorkerAcceptsOnlyTheJoinedThatEchoesItsOwnNonce) {
  const AuthKey key = handshake_key(kJobKey);
  const JoinedPayload joined = sample_joined();
  const Message m = sealed(Opcode::joined, joined_bytes(joined), key);
  EXPECT_EQ(accept_joined(key, m.wire, m.payload, joined.worker_nonce), joined);
  // A genuine joined recorded for another join (another nonce, any byte of it): refused.
  for (size_t i = 0; i < kSessionNonceBytes; ++i) {
    SessionNonce other = joined.worker_nonce;
    other[i] ^= std::byte{0x01};
    EXPECT_FALSE(accept_joined(key, m.wire, m.payload, other).has_value()) << i;
  }
  // Altered anywhere (the server nonce, the reply address, the header), or as a join: refused.
  for (size_t bit = 0; bit < (kHeaderBytes + kJoinedPayloadBytes) * 8; ++bit) {
    Message x = m;
    std::byte& b = bit / 8 < kHeaderBytes ? x.wire[bit / 8] : x.payload[bit / 8 - kHeaderBytes];
    b ^= static_cast<std::byte>(1u << (bit % 8));
    ASSERT_FALSE(accept_joined(key, x.wire, x.payload, joined.worker_nonce).has_value()) << "bit " << bit;
  }
  const Message as_join = sealed(Opcode::join, joined_bytes(joined), key);
  EXPECT_FALSE(accept_joined(key, as_join.wire, as_join.payload, joined.worker_nonce));
  EXPECT_FALSE(accept_joined(handshake_key(derive_key("a-job-secret-of-24-bytes", 4)), m.wire, m.payload,
                             joined.worker_nonce));
}

TEST(Handshake, TagIsSipHashOfHeaderAndPayloadUnderTheHandshakeKey) {
  const AuthKey key = handshake_key(kJobKey);
  const Message m = sealed(Opcode::joined, joined_bytes(sample_joined()), key);
  std::vector<std::byte> in(m.wire.begin(), m.wire.end());
  std::fill_n(in.begin() + kAuthTagOffset, 8, std::byte{0});
  in.insert(in.end(), m.payload.begin(), m.payload.end());
  EXPECT_EQ(load_be<uint64_t>(m.wire.data() + kAuthTagOffset), siphash24(key, in));
}

}  // namespace
}  // namespace phub::proto

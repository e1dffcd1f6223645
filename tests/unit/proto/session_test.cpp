// Tests of session key derivation (session.hpp): the documented libsodium construction, and that every
// input reaches every key.
#include <gtest/gtest.h>

#include <sodium.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "phub/proto/session.hpp"

namespace phub::proto {
namespace {

SessionContext sample_context() {
  SessionContext c;
  c.rank = 5;
  c.incarnation = 0x9abcdef1;
  c.lcore_index = 2;
  for (size_t i = 0; i < kSessionNonceBytes; ++i) {
    c.worker_nonce[i] = static_cast<std::byte>(0x10 + i);
    c.server_nonce[i] = static_cast<std::byte>(0xa0 + i);
  }
  return c;
}

const AuthKey kJobKey{0x0123456789abcdefull, 0x0fedcba987654321ull};

std::vector<AuthKey> all_of(const SessionKeys& k) { return {k.worker_tag, k.server_tag, k.worker_mac, k.server_mac}; }

TEST(SessionKeys, BothSidesDeriveTheSameFourDistinctKeys) {
  const SessionKeys a = derive_session_keys(kJobKey, sample_context());
  EXPECT_EQ(a, derive_session_keys(kJobKey, sample_context()));
  std::set<std::pair<uint64_t, uint64_t>> distinct;
  for (const AuthKey& k : all_of(a)) distinct.insert({k.k0, k.k1});
  EXPECT_EQ(distinct.size(), 4u);
  for (const AuthKey& k : all_of(a)) EXPECT_NE(k, kJobKey);
}

TEST(SessionKeys, ChangingAnySingleInputChangesEveryKey) {
  const SessionKeys base = derive_session_keys(kJobKey, sample_context());
  std::vector<std::pair<std::string, SessionKeys>> variants;
  variants.emplace_back("job key k0", derive_session_keys(AuthKey{kJobKey.k0 ^ 1, kJobKey.k1}, sample_context()));
  variants.emplace_back("job key k1", derive_session_keys(AuthKey{kJobKey.k0, kJobKey.k1 ^ (1ull << 63)}, sample_context()));
  auto with = [&](const char* what, auto change) {
    SessionContext c = sample_context();
    change(c);
    variants.emplace_back(what, derive_session_keys(kJobKey, c));
  };
  with("rank", [](SessionContext& c) { c.rank ^= 1; });
  with("rank high bit", [](SessionContext& c) { c.rank ^= 0x8000; });
  with("incarnation", [](SessionContext& c) { c.incarnation ^= 1; });
  with("lcore", [](SessionContext& c) { c.lcore_index ^= 1; });
  for (size_t i = 0; i < kSessionNonceBytes; ++i) {
    with("worker nonce byte", [i](SessionContext& c) { c.worker_nonce[i] ^= std::byte{0x80}; });
    with("server nonce byte", [i](SessionContext& c) { c.server_nonce[i] ^= std::byte{0x01}; });
  }
  // The two nonces swapped are another session, not the same one.
  with("nonces swapped", [](SessionContext& c) { std::swap(c.worker_nonce, c.server_nonce); });
  for (const auto& [what, keys] : variants) {
    const auto changed = all_of(keys), original = all_of(base);
    for (size_t k = 0; k < changed.size(); ++k) {
      EXPECT_NE(changed[k].k0, original[k].k0) << what << ", key " << k;
      EXPECT_NE(changed[k].k1, original[k].k1) << what << ", key " << k;
    }
  }
}

TEST(SessionKeys, AreLibsodiumsKeyedHashThenKdfAsDocumented) {
  // The construction of session.hpp, recomputed here with libsodium directly.
  const SessionContext c = sample_context();
  unsigned char in[56] = {};
  std::memcpy(in, "phub session v1", 16);
  in[16] = 0x00, in[17] = 0x05;                                      // rank
  in[18] = 0x9a, in[19] = 0xbc, in[20] = 0xde, in[21] = 0xf1;        // incarnation
  in[22] = 0x00, in[23] = 0x02;                                      // lcore index
  std::memcpy(in + 24, c.worker_nonce.data(), 16);
  std::memcpy(in + 40, c.server_nonce.data(), 16);
  unsigned char job[16];
  std::memcpy(job, &kJobKey.k0, 8);  // little-endian on every target phub builds for (x86-64)
  std::memcpy(job + 8, &kJobKey.k1, 8);
  unsigned char master[crypto_kdf_KEYBYTES];
  ASSERT_EQ(crypto_generichash(master, sizeof master, in, sizeof in, job, sizeof job), 0);
  const auto expected = all_of(derive_session_keys(kJobKey, c));
  for (uint64_t id = 1; id <= 4; ++id) {
    unsigned char sub[16];
    ASSERT_EQ(crypto_kdf_derive_from_key(sub, sizeof sub, id, "phubsess", master), 0);
    AuthKey k;
    std::memcpy(&k.k0, sub, 8);
    std::memcpy(&k.k1, sub + 8, 8);
    EXPECT_EQ(k, expected[id - 1]) << "subkey " << id;
  }
}

TEST(HandshakeKey, IsPerJobAndNoSessionOrJobKey) {
  const AuthKey h = handshake_key(kJobKey);
  EXPECT_EQ(h, handshake_key(kJobKey));
  EXPECT_NE(h, kJobKey);
  EXPECT_NE(h, handshake_key(AuthKey{kJobKey.k0, kJobKey.k1 ^ 1}));
  for (const AuthKey& k : all_of(derive_session_keys(kJobKey, sample_context()))) EXPECT_NE(h, k);
}

TEST(SessionNonce, DrawsDifferAndAreNeverAllZero) {
  std::set<std::vector<std::byte>> seen;
  const SessionNonce zero{};
  for (int i = 0; i < 1000; ++i) {
    const SessionNonce n = draw_session_nonce();
    ASSERT_NE(n, zero);
    seen.insert(std::vector<std::byte>(n.begin(), n.end()));
  }
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace phub::proto

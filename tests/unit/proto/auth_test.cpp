// Tests of SipHash-2-4 (reference vectors), header signing, and CRC32C.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include <sodium.h>

#include "phub/proto/auth.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

AuthKey reference_key() {
  // The reference key 00 01 02 ... 0f, read as two little-endian words.
  return AuthKey{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
}

TEST(SipHash, MatchesReferenceVectors) {
  std::array<std::byte, 15> msg{};
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<std::byte>(i);
  EXPECT_EQ(siphash24(reference_key(), std::span(msg).first(0)), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(siphash24(reference_key(), msg), 0xa129ca6149be45e5ull);
}

TEST(SipHash, AnEmptySpanWithoutDataIsTheEmptyMessage) {
  // A header-only forward MACs no payload: a span whose data() is null (UBSan: no memcpy from it).
  EXPECT_EQ(siphash24(reference_key(), std::span<const std::byte>()), 0x726fdb47dd0e0e31ull);
}

TEST(SipHash, EveryLengthDiffers) {
  std::array<std::byte, 64> msg{};
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= msg.size(); ++n) seen.insert(siphash24(reference_key(), std::span(msg).first(n)));
  EXPECT_EQ(seen.size(), msg.size() + 1);
}

TEST(SipHash, PiecesInAnySplitGiveTheValueOfTheWhole) {
  // The reference vector of 15 bytes, fed in every split into three pieces, and a longer message in
  // pieces of every length from 1 to 17 (pieces that end inside, at and across word boundaries).
  std::array<std::byte, 15> msg{};
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<std::byte>(i);
  for (size_t a = 0; a <= msg.size(); ++a) {
    for (size_t b = a; b <= msg.size(); ++b) {
      SipHasher h(reference_key());
      h.update(std::span(msg).first(a));
      h.update(std::span(msg).subspan(a, b - a));
      h.update(std::span(msg).subspan(b));
      ASSERT_EQ(h.finish(), 0xa129ca6149be45e5ull) << a << " " << b;
    }
  }
  const auto long_msg = test::bytes_of(300, 9);
  const uint64_t whole = siphash24(reference_key(), long_msg);
  for (size_t piece = 1; piece <= 17; ++piece) {
    SipHasher h(reference_key());
    for (size_t at = 0; at < long_msg.size(); at += piece) {
      h.update(std::span(long_msg).subspan(at, std::min(piece, long_msg.size() - at)));
    }
    EXPECT_EQ(h.finish(), whole) << "pieces of " << piece;
  }
}

TEST(Auth, DerivedKeysDependOnTheSecretAndTheJob) {
  EXPECT_EQ(derive_key("job-secret-0123456", 3), derive_key("job-secret-0123456", 3));
  EXPECT_NE(derive_key("job-secret-0123456", 3), derive_key("job-secreT-0123456", 3));
  EXPECT_NE(derive_key("", 3), derive_key("x", 3));
  // Two jobs that share a secret get different keys: a tag of one job never verifies in the other.
  EXPECT_NE(derive_key("job-secret-0123456", 3), derive_key("job-secret-0123456", 4));
  std::set<std::pair<uint64_t, uint64_t>> keys;
  for (uint32_t job = 1; job <= 64; ++job) {
    const AuthKey k = derive_key("shared-secret-0123456", job);
    keys.insert({k.k0, k.k1});
  }
  EXPECT_EQ(keys.size(), 64u);
}

TEST(Auth, DerivedKeysAreLibsodiumsKdfOfTheSecretsHash) {
  // The documented derivation, recomputed here with libsodium directly (docs/security.md, "Keys").
  const std::string secret = "documented-secret-0123";
  unsigned char master[crypto_kdf_KEYBYTES];
  crypto_generichash(master, sizeof master, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                     nullptr, 0);
  unsigned char sub[16];
  ASSERT_EQ(crypto_kdf_derive_from_key(sub, sizeof sub, 9, "phubjob1", master), 0);
  uint64_t k0 = 0, k1 = 0;
  std::memcpy(&k0, sub, 8);  // little-endian on every target phub builds for (x86-64)
  std::memcpy(&k1, sub + 8, 8);
  EXPECT_EQ(derive_key(secret, 9), (AuthKey{k0, k1}));
}

TEST(Auth, SignedHeaderVerifiesAndEveryBitFlipBreaksIt) {
  std::array<std::byte, kHeaderBytes> wire{};
  write_header(test::sample_header(), wire);
  const AuthKey key = derive_key("s3cret", 1);
  sign_header(key, wire);
  EXPECT_TRUE(verify_header(key, wire));
  EXPECT_FALSE(verify_header(derive_key("other", 1), wire));
  for (size_t bit = 0; bit < kHeaderBytes * 8; ++bit) {
    auto flipped = wire;
    flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_FALSE(verify_header(key, flipped)) << "bit " << bit;
  }
}

TEST(Auth, AddressCookieBindsJobRankAddressAndServerKey) {
  const AuthKey k{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const uint32_t c = address_cookie(k, 7, 3, 0xc6120065, 50003);
  EXPECT_NE(c, 0u);
  EXPECT_EQ(c, address_cookie(k, 7, 3, 0xc6120065, 50003));
  EXPECT_NE(c, address_cookie(k, 8, 3, 0xc6120065, 50003));
  EXPECT_NE(c, address_cookie(k, 7, 4, 0xc6120065, 50003));
  EXPECT_NE(c, address_cookie(k, 7, 3, 0xc6120066, 50003));
  EXPECT_NE(c, address_cookie(k, 7, 3, 0xc6120065, 50004));
  EXPECT_NE(c, address_cookie(AuthKey{k.k0 ^ 1, k.k1}, 7, 3, 0xc6120065, 50003));
  // Never 0 (a worker's "no cookie"), over many addresses.
  for (uint32_t ip = 0; ip < 100000; ++ip) ASSERT_NE(address_cookie(k, 1, 0, ip, 1), 0u);
}

TEST(Crc32c, MatchesTheCheckValue) {
  const char* check = "123456789";
  EXPECT_EQ(crc32c(std::as_bytes(std::span(check, 9))), 0xe3069283u);
  EXPECT_EQ(crc32c({}), 0u);
}

}  // namespace
}  // namespace phub::proto

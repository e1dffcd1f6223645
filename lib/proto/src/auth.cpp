// SipHash-2-4 header tags keyed per job, job keys through libsodium's KDF, and payload CRC32C through ISA-L.
#include "phub/proto/auth.hpp"

#include <isa-l/crc.h>
#include <sodium.h>

#include <bit>
#include <cstdlib>
#include <cstring>

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

// The SipHash state as locals of the function that runs the rounds: a std::byte input may alias anything,
// so rounds on members would store them back before every load of the input.
struct SipState {
  uint64_t v0, v1, v2, v3;

  void round() noexcept {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }

  void absorb(uint64_t m) noexcept {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

}  // namespace

SipHasher::SipHasher(const AuthKey& key) noexcept
    : v0_(key.k0 ^ 0x736f6d6570736575ull),
      v1_(key.k1 ^ 0x646f72616e646f6dull),
      v2_(key.k0 ^ 0x6c7967656e657261ull),
      v3_(key.k1 ^ 0x7465646279746573ull) {}

void SipHasher::update(std::span<const std::byte> piece) noexcept {
  SipState s{v0_, v1_, v2_, v3_};
  size_t i = 0;
  size_t filled = length_ % 8;
  length_ += piece.size();
  if (filled != 0) {  // complete the word an earlier piece began
    for (; filled < 8 && i < piece.size(); ++filled, ++i) {
      partial_ |= static_cast<uint64_t>(piece[i]) << (8 * filled);
    }
    if (filled < 8) return;
    s.absorb(partial_);
    partial_ = 0;
  }
  const size_t words_end = i + (piece.size() - i) / 8 * 8;
  for (; i < words_end; i += 8) s.absorb(load_le<uint64_t>(piece.data() + i));
  for (size_t shift = 0; i < piece.size(); ++i, shift += 8) partial_ |= static_cast<uint64_t>(piece[i]) << shift;
  v0_ = s.v0, v1_ = s.v1, v2_ = s.v2, v3_ = s.v3;
}

uint64_t SipHasher::finish() noexcept {
  SipState s{v0_, v1_, v2_, v3_};
  s.absorb(partial_ | (static_cast<uint64_t>(length_ & 0xff) << 56));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

uint64_t siphash24(const AuthKey& key, std::span<const std::byte> data) noexcept {
  SipHasher h(key);
  h.update(data);
  return h.finish();
}

void derive_secret_subkey(std::string_view secret, uint64_t id, const char (&context)[9],
                          std::span<unsigned char> out) noexcept {
  // libsodium: the secret's BLAKE2b-256 hash is the master key, and the key is its crypto_kdf subkey number
  // `id` under a context of phub's own, so two uses of one secret never share a key.
  static_assert(crypto_kdf_CONTEXTBYTES == 8);
  if (sodium_init() < 0) std::abort();  // only when the system has no usable random source, at the first call
  if (out.size() < crypto_kdf_BYTES_MIN || out.size() > crypto_kdf_BYTES_MAX) std::abort();  // a caller's bug
  unsigned char master[crypto_kdf_KEYBYTES];
  crypto_generichash(master, sizeof master, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                     nullptr, 0);
  crypto_kdf_derive_from_key(out.data(), out.size(), id, context, master);
  sodium_memzero(master, sizeof master);
}

AuthKey derive_key(std::string_view secret, uint32_t job_id) noexcept {
  unsigned char sub[16];
  derive_secret_subkey(secret, job_id, "phubjob1", sub);
  const AuthKey key{load_le<uint64_t>(reinterpret_cast<const std::byte*>(sub)),
                    load_le<uint64_t>(reinterpret_cast<const std::byte*>(sub) + 8)};
  sodium_memzero(sub, sizeof sub);
  return key;
}

void copy_untagged_header(std::span<const std::byte, kHeaderBytes> wire, std::span<std::byte, kHeaderBytes> out) noexcept {
  std::memcpy(out.data(), wire.data(), kHeaderBytes);
  std::memset(out.data() + kAuthTagOffset, 0, sizeof(uint64_t));
}

uint64_t header_tag(const AuthKey& key, std::span<const std::byte, kHeaderBytes> wire) noexcept {
  std::byte copy[kHeaderBytes];
  copy_untagged_header(wire, copy);
  return siphash24(key, copy);
}

void sign_header(const AuthKey& key, std::span<std::byte, kHeaderBytes> wire) noexcept {
  store_be<uint64_t>(wire.data() + kAuthTagOffset, header_tag(key, wire));
}

bool verify_header(const AuthKey& key, std::span<const std::byte, kHeaderBytes> wire) noexcept {
  return load_be<uint64_t>(wire.data() + kAuthTagOffset) == header_tag(key, wire);
}

uint32_t address_cookie(const AuthKey& server_key, uint32_t job_id, uint16_t rank, uint32_t ipv4,
                        uint16_t udp_port) noexcept {
  std::byte in[12];
  store_be<uint32_t>(in, job_id);
  store_be<uint16_t>(in + 4, rank);
  store_be<uint32_t>(in + 6, ipv4);
  store_be<uint16_t>(in + 10, udp_port);
  const uint64_t h = siphash24(server_key, in);
  const auto cookie = static_cast<uint32_t>(h ^ (h >> 32));
  return cookie != 0 ? cookie : 1;  // 0 means "no cookie" in a worker's aux
}

AuthKey fwd_payload_key(const AuthKey& job_key) noexcept {
  constexpr std::string_view k0 = "phub-fwd-payload-k0", k1 = "phub-fwd-payload-k1";
  return AuthKey{siphash24(job_key, std::as_bytes(std::span(k0.data(), k0.size()))),
                 siphash24(job_key, std::as_bytes(std::span(k1.data(), k1.size())))};
}

void seal_fwd(const AuthKey& job_key, const AuthKey& payload_key, std::span<std::byte, kHeaderBytes> wire,
              std::span<const std::byte> payload) noexcept {
  store_header_mac(wire, siphash24(payload_key, payload));
  sign_header(job_key, wire);
}

bool verify_fwd(const AuthKey& job_key, const AuthKey& payload_key, std::span<const std::byte, kHeaderBytes> wire,
                std::span<const std::byte> payload) noexcept {
  if (!verify_header(job_key, wire)) return false;
  return load_header_mac(wire) == siphash24(payload_key, payload);
}

uint32_t crc32c(std::span<const std::byte> data, std::span<const std::byte> more) noexcept {
  // ISA-L's crc32_iscsi takes and returns the raw register; the standard CRC32C inverts both ends.
  auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data.data()));  // ISA-L does not write
  uint32_t reg = crc32_iscsi(p, static_cast<int>(data.size()), 0xffffffffu);
  if (!more.empty()) {
    reg = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<std::byte*>(more.data())),
                      static_cast<int>(more.size()), reg);
  }
  return reg ^ 0xffffffffu;
}

}  // namespace phub::proto

// Session keys from the job key and both sides' nonces, through libsodium's keyed BLAKE2b and KDF.
#include "phub/proto/session.hpp"

#include <sodium.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

using KeyBytes = std::array<unsigned char, 16>;
static_assert(sizeof(KeyBytes) == crypto_generichash_KEYBYTES_MIN);

void ensure_sodium() noexcept {
  if (sodium_init() < 0) std::abort();  // only when the system has no usable random source, at the first call
}

KeyBytes key_bytes(const AuthKey& key) noexcept {
  KeyBytes out;
  store_le<uint64_t>(reinterpret_cast<std::byte*>(out.data()), key.k0);
  store_le<uint64_t>(reinterpret_cast<std::byte*>(out.data()) + 8, key.k1);
  return out;
}

AuthKey auth_key_of(const unsigned char* bytes) noexcept {
  const auto* p = reinterpret_cast<const std::byte*>(bytes);
  return AuthKey{load_le<uint64_t>(p), load_le<uint64_t>(p + 8)};
}

constexpr size_t kLabelBytes = 16;
constexpr size_t kInputBytes = kLabelBytes + 2 + 4 + 2 + 2 * kSessionNonceBytes;

}  // namespace

SessionKeys derive_session_keys(const AuthKey& job_key, const SessionContext& c) noexcept {
  ensure_sodium();
  static constexpr char kLabel[kLabelBytes] = "phub session v1";
  static constexpr char kContext[crypto_kdf_CONTEXTBYTES + 1] = "phubsess";

  std::array<std::byte, kInputBytes> in{};
  std::byte* p = in.data();
  std::copy_n(reinterpret_cast<const std::byte*>(kLabel), kLabelBytes, p);
  store_be<uint16_t>(p + 16, c.rank);
  store_be<uint32_t>(p + 18, c.incarnation);
  store_be<uint16_t>(p + 22, c.lcore_index);
  std::copy(c.worker_nonce.begin(), c.worker_nonce.end(), p + 24);
  std::copy(c.server_nonce.begin(), c.server_nonce.end(), p + 24 + kSessionNonceBytes);

  KeyBytes job = key_bytes(job_key);
  unsigned char master[crypto_kdf_KEYBYTES];
  static_assert(sizeof master <= crypto_generichash_BYTES_MAX && sizeof master >= crypto_generichash_BYTES_MIN);
  crypto_generichash(master, sizeof master, reinterpret_cast<const unsigned char*>(in.data()), in.size(), job.data(),
                     job.size());

  unsigned char sub[16];
  static_assert(sizeof sub >= crypto_kdf_BYTES_MIN);
  auto subkey = [&](uint64_t id) {
    crypto_kdf_derive_from_key(sub, sizeof sub, id, kContext, master);
    return auth_key_of(sub);
  };
  SessionKeys keys;
  keys.worker_tag = subkey(1);
  keys.server_tag = subkey(2);
  keys.worker_mac = subkey(3);
  keys.server_mac = subkey(4);
  sodium_memzero(master, sizeof master);
  sodium_memzero(sub, sizeof sub);
  sodium_memzero(job.data(), job.size());
  return keys;
}

AuthKey handshake_key(const AuthKey& job_key) noexcept {
  ensure_sodium();
  constexpr std::string_view kLabel = "phub handshake v1";
  KeyBytes job = key_bytes(job_key);
  unsigned char out[16];
  static_assert(sizeof out >= crypto_generichash_BYTES_MIN);
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(kLabel.data()), kLabel.size(),
                     job.data(), job.size());
  const AuthKey key = auth_key_of(out);
  sodium_memzero(out, sizeof out);
  sodium_memzero(job.data(), job.size());
  return key;
}

SessionNonce draw_session_nonce() noexcept {
  ensure_sodium();
  SessionNonce n{};
  do {
    randombytes_buf(n.data(), n.size());
  } while (std::all_of(n.begin(), n.end(), [](std::byte b) { return b == std::byte{0}; }));
  return n;
}

}  // namespace phub::proto

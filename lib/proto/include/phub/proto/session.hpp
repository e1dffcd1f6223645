// Session keys (docs/protocol.md, "Session keys"): what a worker's join and the server's answer establish
// for one rank on one server lcore, derived from the job key and fresh nonces of both sides with libsodium.
// The engine and the client both use them. Pure, no DPDK.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "phub/proto/auth.hpp"

namespace phub::proto {

inline constexpr size_t kSessionNonceBytes = 16;
using SessionNonce = std::array<std::byte, kSessionNonceBytes>;

// Everything a session is bound to besides the job key.
struct SessionContext {
  uint16_t rank = 0;
  uint32_t incarnation = 0;   // the worker process's incarnation (the join's aux)
  uint16_t lcore_index = 0;   // the server lcore's position in the config's lcores (its UDP port - port_base)
  SessionNonce worker_nonce{};  // drawn by the worker for this join
  SessionNonce server_nonce{};  // drawn by the server lcore for its answer
};

// The four keys of a session: one per direction for header tags and for payload MACs. No two are related.
struct SessionKeys {
  AuthKey worker_tag;   // tags of packets from the worker to the server
  AuthKey server_tag;   // tags of packets from the server to the worker
  AuthKey worker_mac;   // payload MACs from the worker to the server
  AuthKey server_mac;   // payload MACs from the server to the worker
  friend bool operator==(const SessionKeys&, const SessionKeys&) = default;
};

// The session master is keyed BLAKE2b-256 (libsodium crypto_generichash, key = the job key's 16 bytes, k0
// then k1 little-endian) of "phub session v1" (16 bytes with its NUL), rank (u16), incarnation (u32),
// lcore_index (u16), all big-endian, then the worker's and the server's nonces: 56 bytes of fixed layout.
// Each key is crypto_kdf_derive_from_key of 16 bytes from the master, context "phubsess", subkey ids
// 1 worker_tag, 2 server_tag, 3 worker_mac, 4 server_mac.
[[nodiscard]] SessionKeys derive_session_keys(const AuthKey& job_key, const SessionContext& context) noexcept;

// The key of join and joined tags (handshake.hpp): keyed BLAKE2b-128 of "phub handshake v1" under the job
// key, so that no header tag of the job (job key) and no handshake tag share a key.
[[nodiscard]] AuthKey handshake_key(const AuthKey& job_key) noexcept;

// A fresh nonce from libsodium's random source (randombytes_buf), never all zero.
[[nodiscard]] SessionNonce draw_session_nonce() noexcept;

}  // namespace phub::proto

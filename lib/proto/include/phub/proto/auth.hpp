// Packet authentication: SipHash-2-4 of the header keyed by a per-job secret; payload CRC32C via ISA-L.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "phub/proto/header.hpp"

namespace phub::proto {

struct AuthKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  friend bool operator==(const AuthKey&, const AuthKey&) = default;
};

// SipHash-2-4 (Aumasson & Bernstein), 64-bit output.
[[nodiscard]] uint64_t siphash24(const AuthKey& key, std::span<const std::byte> data) noexcept;

// SipHash-2-4 of a message given in pieces, without copying them together: update() with each piece in
// order, then finish() once gives siphash24 of their concatenation.
class SipHasher {
 public:
  explicit SipHasher(const AuthKey& key) noexcept;
  void update(std::span<const std::byte> piece) noexcept;
  [[nodiscard]] uint64_t finish() noexcept;

 private:
  uint64_t v0_, v1_, v2_, v3_;
  uint64_t partial_ = 0;  // the bytes of an unfinished 8-byte word, little-endian
  size_t length_ = 0;     // bytes so far
};

// Copy a wire header to `out` with its tag field zero: the start of every tag's input. (Hashing a copy in
// one piece is faster than feeding the header around its tag field in pieces.)
void copy_untagged_header(std::span<const std::byte, kHeaderBytes> wire, std::span<std::byte, kHeaderBytes> out) noexcept;

// `out.size()` bytes (16..64) of key number `id` under `context` (8 characters, one per use) from a secret:
// libsodium's KDF under the secret's BLAKE2b-256 hash. derive_key and the checkpoint key (lib/persist) use it.
void derive_secret_subkey(std::string_view secret, uint64_t id, const char (&context)[9],
                          std::span<unsigned char> out) noexcept;

// A job's 128-bit key from its configured secret and its id, by libsodium's KDF (BLAKE2b): the same
// secret gives every job its own key. Server and workers derive it alike (docs/protocol.md, "Authentication").
[[nodiscard]] AuthKey derive_key(std::string_view secret, uint32_t job_id) noexcept;

// The tag of a wire header: SipHash-2-4 over its 54 bytes with the tag field taken as zero. The header
// covers job, rank, round, position and (with the crc flag) the payload's CRC32C.
[[nodiscard]] uint64_t header_tag(const AuthKey& key, std::span<const std::byte, kHeaderBytes> wire) noexcept;

// Compute the tag of a wire header and store it in its tag field.
void sign_header(const AuthKey& key, std::span<std::byte, kHeaderBytes> wire) noexcept;

// Whether the tag stored in a wire header is right for `key`.
[[nodiscard]] bool verify_header(const AuthKey& key, std::span<const std::byte, kHeaderBytes> wire) noexcept;

// The address cookie a server gives a worker in `joined` (in the crc32c field): SipHash-2-4 of the job id,
// the rank, and the IPv4 address and UDP port the join came from, under a key the server draws at start.
// A worker that carries it in `aux` proves that it receives at that address; before that, the server
// sends it no more bytes than it received from there (docs/protocol.md, "Address cookies"). Never 0.
[[nodiscard]] uint32_t address_cookie(const AuthKey& server_key, uint32_t job_id, uint16_t rank, uint32_t ipv4,
                                      uint16_t udp_port) noexcept;

// Hub forwards (fwd_partial, fwd_result; docs/hierarchy.md) carry a 64-bit SipHash-2-4 MAC of their payload
// in the header's crc32c (high half) and aux (low half) fields, which the header tag then covers.
// The MAC's key is derived from the job key, so header tags and payload MACs never share a key.
[[nodiscard]] AuthKey fwd_payload_key(const AuthKey& job_key) noexcept;
// Write the payload MAC into a written forward header and sign it. `wire` is the header, `payload` what
// follows it.
void seal_fwd(const AuthKey& job_key, const AuthKey& payload_key, std::span<std::byte, kHeaderBytes> wire,
              std::span<const std::byte> payload) noexcept;
// Whether a received forward's tag and payload MAC are both right.
[[nodiscard]] bool verify_fwd(const AuthKey& job_key, const AuthKey& payload_key,
                              std::span<const std::byte, kHeaderBytes> wire, std::span<const std::byte> payload) noexcept;

// CRC32C (Castagnoli) of a payload, standard form (init ~0, final xor ~0), computed with ISA-L.
// (Of `data` then `more`, given apart: a payload and its tail sent from another buffer.)
[[nodiscard]] uint32_t crc32c(std::span<const std::byte> data, std::span<const std::byte> more = {}) noexcept;

}  // namespace phub::proto

// The session handshake's payloads and tags (docs/protocol.md, "The handshake"). A worker's join carries a
// fresh nonce; the server's joined echoes it with a challenge of its own (join_challenge: bound to the server's
// run, the job's epoch on that lcore and the join's source, so that no earlier run or server life made it) and
// the address it sees the worker at. Only a confirming join, which carries both nonces, claims a rank or
// starts an epoch. Both kinds are tagged, header and payload, under the job's handshake key (session.hpp). A
// worker takes a joined only if it echoes the nonce that worker sent, so a recorded or altered one is refused.
// Pure, no DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "phub/proto/auth.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::proto {

inline constexpr uint8_t kHandshakeVersion = 1;
inline constexpr uint8_t kConfirmVersion = 2;  // a join that answers the server's challenge

// join payload, 44 bytes: 0 version u8 (1: a first join, 2: a confirming one) | 1 reserved, 3 bytes of 0 |
// 4 worker nonce, 16 bytes | 20 the server's challenge, 16 bytes (version 2; 0 in version 1) | 36 padding,
// 8 bytes of 0. The padding makes a join as long as its answer: a server answers a source that has not proven
// its address with no more bytes than it received (docs/protocol.md, "Address cookies").
inline constexpr size_t kJoinPayloadBytes = kHandshakePayloadBytes;
struct JoinPayload {
  SessionNonce worker_nonce{};
  bool confirm = false;
  SessionNonce server_nonce{};  // the challenge a confirm answers (all zero in a first join)
  friend bool operator==(const JoinPayload&, const JoinPayload&) = default;
};

// What the job asks of the session a joined establishes (the joined payload's options byte).
namespace session_option {
inline constexpr uint8_t session = 1u << 0;      // every later packet of the rank, both ways, is a session
                                                 // packet (session_packet.hpp); without it, the job key's tags
inline constexpr uint8_t payload_mac = 1u << 1;  // ... and carries a payload MAC (only with session)
inline constexpr uint8_t confirmed = 1u << 2;    // this answers a confirming join the server took: the rank is
                                                 // the joiner's and (session) its session is the rank's now
// No join's answer: the lcore that received the join (at another port than the joined lcore's home, in a job
// with the chunk-to-interface map, from a worker that follows it: header.hpp flag::follows_map) names the
// address to join there, in the header's chunk_id, instead of handing the join to the joined lcore. Alone,
// with an all-zero server nonce; the worker takes nothing else from it.
inline constexpr uint8_t redirect = 1u << 3;
inline constexpr uint8_t known = session | payload_mac | confirmed | redirect;
}  // namespace session_option

// joined payload, 44 bytes: 0 version u8 | 1 options u8 (session_option) | 2 reserved, 2 bytes of 0 |
// 4 the join's worker nonce, 16 bytes |
// 20 server nonce, 16 bytes | 36 reply IPv4 u32 | 40 reply UDP port u16 | 42 reserved u16 (0). Big-endian.
// The reply address is the join's source as the server saw it: the address session tags bind (a worker
// behind NAT learns it only from here).
inline constexpr size_t kJoinedPayloadBytes = kHandshakePayloadBytes;
struct JoinedPayload {
  SessionNonce worker_nonce{};
  SessionNonce server_nonce{};
  ReplyAddress reply{};
  uint8_t options = 0;  // session_option bits
  friend bool operator==(const JoinedPayload&, const JoinedPayload&) = default;
};

void write_join_payload(const JoinPayload& p, std::span<std::byte, kJoinPayloadBytes> out) noexcept;
// Nothing unless exactly kJoinPayloadBytes, version 1 or 2, reserved and padding bytes 0, a worker nonce not all
// zero, and a challenge that is all zero in version 1 and not all zero in version 2.
[[nodiscard]] std::optional<JoinPayload> parse_join_payload(std::span<const std::byte> payload) noexcept;

void write_joined_payload(const JoinedPayload& p, std::span<std::byte, kJoinedPayloadBytes> out) noexcept;
// Nothing unless exactly kJoinedPayloadBytes, this version, known options (payload_mac only with session,
// redirect only alone), reserved bytes 0, a worker nonce not all zero, a server nonce all zero in a redirect
// and not all zero elsewhere, and a reply address with a nonzero IPv4 address and port.
[[nodiscard]] std::optional<JoinedPayload> parse_joined_payload(std::span<const std::byte> payload) noexcept;

// SipHash-2-4 under `handshake_key` of the 54 header bytes with the tag field taken as zero, then the payload.
[[nodiscard]] uint64_t handshake_tag(const AuthKey& handshake_key, std::span<const std::byte, kHeaderBytes> wire,
                                     std::span<const std::byte> payload) noexcept;
// Store the handshake tag in the header's tag field.
void seal_handshake(const AuthKey& handshake_key, std::span<std::byte, kHeaderBytes> wire,
                    std::span<const std::byte> payload) noexcept;
[[nodiscard]] bool verify_handshake(const AuthKey& handshake_key, std::span<const std::byte, kHeaderBytes> wire,
                                    std::span<const std::byte> payload) noexcept;

// The server's whole check of a received join: opcode join, payload_bytes the payload's length, the tag,
// and the payload's form. Nothing if any fails.
[[nodiscard]] std::optional<JoinPayload> accept_join(const AuthKey& handshake_key,
                                                     std::span<const std::byte, kHeaderBytes> wire,
                                                     std::span<const std::byte> payload) noexcept;
// The worker's whole check of a received joined: as accept_join for opcode joined, and its echoed nonce is
// `sent`, the nonce of the worker's own pending join.
[[nodiscard]] std::optional<JoinedPayload> accept_joined(const AuthKey& handshake_key,
                                                         std::span<const std::byte, kHeaderBytes> wire,
                                                         std::span<const std::byte> payload,
                                                         const SessionNonce& sent) noexcept;

// The server's challenge: keyed BLAKE2b-128 (crypto_generichash) under a key the server draws at start of
// "phub challenge v1" (18 bytes with its NUL), the job id (u32), the lcore's index (u16), the rank (u16), the
// job's epoch on the lcore (u16), the incarnation (u32), the join's source IPv4 address (u32) and UDP port
// (u16), all big-endian, then the worker's nonce. The server keeps nothing per join: it computes the challenge
// again for a confirm, which therefore opens only in the server run, epoch and source that it was sent to.
inline constexpr size_t kChallengeKeyBytes = 32;
using ChallengeKey = std::array<std::byte, kChallengeKeyBytes>;
struct ChallengeContext {
  uint32_t job_id = 0;
  uint16_t lcore_index = 0;
  uint16_t rank = 0;
  uint16_t epoch = 0;
  uint32_t incarnation = 0;
  ReplyAddress source{};
  SessionNonce worker_nonce{};
};
[[nodiscard]] SessionNonce join_challenge(const ChallengeKey& key, const ChallengeContext& context) noexcept;
[[nodiscard]] ChallengeKey draw_challenge_key() noexcept;

}  // namespace phub::proto

// The session handshake's payloads and tags (docs/protocol.md, "The handshake"): a worker's join carries a
// fresh nonce, the server's joined echoes it with a nonce of its own and the address it sees the worker at; both
// messages are tagged, header and payload, under the job's handshake key (session.hpp). A worker takes a
// joined only if it echoes the nonce that worker sent, so a recorded or altered one is refused. Pure, no DPDK.
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

// join payload, 44 bytes: 0 version u8 | 1 reserved, 3 bytes of 0 | 4 worker nonce, 16 bytes | 20 padding,
// 24 bytes of 0. The padding makes a join as long as its answer: a server answers a source that has not
// proven its address with no more bytes than it received (docs/protocol.md, "Address cookies").
inline constexpr size_t kJoinPayloadBytes = kHandshakePayloadBytes;
struct JoinPayload {
  SessionNonce worker_nonce{};
  friend bool operator==(const JoinPayload&, const JoinPayload&) = default;
};

// What the job asks of the session a joined establishes (the joined payload's options byte).
namespace session_option {
inline constexpr uint8_t session = 1u << 0;      // every later packet of the rank, both ways, is a session
                                                 // packet (session_packet.hpp); without it, the job key's tags
inline constexpr uint8_t payload_mac = 1u << 1;  // ... and carries a payload MAC (only with session)
inline constexpr uint8_t known = session | payload_mac;
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
// Nothing unless exactly kJoinPayloadBytes, this version, reserved and padding bytes 0 and a nonce not all zero.
[[nodiscard]] std::optional<JoinPayload> parse_join_payload(std::span<const std::byte> payload) noexcept;

void write_joined_payload(const JoinedPayload& p, std::span<std::byte, kJoinedPayloadBytes> out) noexcept;
// Nothing unless exactly kJoinedPayloadBytes, this version, known options (payload_mac only with session),
// reserved bytes 0, neither nonce all zero, and a
// reply address with a nonzero IPv4 address and port.
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

}  // namespace phub::proto

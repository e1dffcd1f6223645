// Tags and payload MACs of session packets (docs/protocol.md, "Session packets"): a header tag that also
// binds the address the server answers and the high half of a 64-bit sequence number, and a keyed MAC of the
// payload. Keys from session.hpp. Pure, no DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "phub/proto/auth.hpp"
#include "phub/proto/header.hpp"

namespace phub::proto {

// The address the server sends a rank's packets to: the worker's IPv4 address and UDP port as the server
// sees them (after any NAT on the way).
struct ReplyAddress {
  uint32_t ipv4 = 0;
  uint16_t udp_port = 0;
  friend bool operator==(const ReplyAddress&, const ReplyAddress&) = default;
};

// Sequence numbers are 64 bits; the header's seq field carries the low 32 and the receiver infers the high
// 32 (replay_window.hpp), as IPsec's extended sequence numbers do.
[[nodiscard]] constexpr uint32_t seq_low(uint64_t seq) noexcept { return static_cast<uint32_t>(seq); }
[[nodiscard]] constexpr uint32_t seq_high(uint64_t seq) noexcept { return static_cast<uint32_t>(seq >> 32); }

// SipHash-2-4 under `tag_key` of the 54 header bytes with the tag field taken as zero, then the reply
// address (IPv4 u32, UDP port u16) and `high` (u32), big-endian: 64 bytes.
[[nodiscard]] uint64_t session_tag(const AuthKey& tag_key, std::span<const std::byte, kHeaderBytes> wire,
                                   ReplyAddress reply, uint32_t high) noexcept;

// Write seq's low half into the header's seq field, then the session tag into its tag field.
void seal_session(const AuthKey& tag_key, std::span<std::byte, kHeaderBytes> wire, ReplyAddress reply,
                  uint64_t seq) noexcept;

// Whether the header's seq field is seq's low half and its tag is the session tag for `reply` and seq's
// high half. A wrong guess of the high half (replay_window.hpp, infer) fails here.
[[nodiscard]] bool verify_session(const AuthKey& tag_key, std::span<const std::byte, kHeaderBytes> wire,
                                  ReplyAddress reply, uint64_t seq) noexcept;

// The payload MAC: SipHash-2-4 under `mac_key` of seq (u64, big-endian) then the payload (given in two pieces
// when its tail is sent from elsewhere, header.hpp flag::tail). A 64-bit PRF output, as the header tags; the
// wire is to carry it in header fields the session tag covers.
[[nodiscard]] uint64_t session_payload_mac(const AuthKey& mac_key, uint64_t seq, std::span<const std::byte> payload,
                                           std::span<const std::byte> tail = {}) noexcept;

}  // namespace phub::proto

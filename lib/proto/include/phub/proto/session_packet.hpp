// Sealing and opening whole session packets (protocol version 3, docs/protocol.md, "Sessions"): the header
// tag that binds the reply address and the 64-bit sequence number (session_tag.hpp), the anti-replay
// window (replay_window.hpp) and, with the mac flag, the payload MAC in the header's crc32c and aux fields.
// The same two functions serve both sides: a worker seals with its session's worker keys and opens with the
// server keys, the server the other way round. Pure, no DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "phub/proto/header.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::proto {

// The keys of one direction of a session.
struct SessionDirection {
  AuthKey tag;
  AuthKey mac;
};
[[nodiscard]] inline SessionDirection worker_to_server(const SessionKeys& k) noexcept { return {k.worker_tag, k.worker_mac}; }
[[nodiscard]] inline SessionDirection server_to_worker(const SessionKeys& k) noexcept { return {k.server_tag, k.server_mac}; }

// Seal a written packet in place: `msg` is the header (kHeaderBytes, every field but the tag, seq and, with
// `mac`, crc32c and aux, as it is to be sent; the crc flag clear) and the payload after it. With `mac` the
// mac flag is set and the payload MAC (session_payload_mac, under d.mac, of seq and the payload) goes to
// crc32c (high half) and aux (low half); then seq's low half and the session tag (under d.tag, binding
// `reply` and seq's high half). Without `mac` the mac flag is cleared. `seq` must never repeat under d's keys.
void seal_session_packet(const SessionDirection& d, std::span<std::byte> msg, ReplyAddress reply, uint64_t seq,
                         bool mac) noexcept;

// The same for a header whose payload lies elsewhere (sent from another buffer: a result's payload in the
// result buffer, a push's in the caller's tensor): `wire` is sealed, `payload` only read for the MAC.
void seal_session_header(const SessionDirection& d, std::span<std::byte, kHeaderBytes> wire,
                         std::span<const std::byte> payload, ReplyAddress reply, uint64_t seq, bool mac) noexcept;
// The same for a payload sent from two buffers: the elements, then the tail (header.hpp, flag::tail).
void seal_session_header(const SessionDirection& d, std::span<std::byte, kHeaderBytes> wire,
                         std::span<const std::byte> payload, std::span<const std::byte> tail, ReplyAddress reply,
                         uint64_t seq, bool mac) noexcept;

// Opcodes whose session packets carry the payload MAC in a payload_mac job: the ones with elements that pass
// between a worker and its server (push, init, result; hub opcodes have their own MAC).
[[nodiscard]] constexpr bool session_opcode_has_mac(Opcode op) noexcept {
  return opcode_carries_elems(op) && !opcode_is_forward(op);
}

enum class SessionVerdict : uint8_t {
  ok,           // authentic and fresh: now committed to the window
  replayed,     // its number was seen (a replay, or a forgery that reused one): not verified further
  bad_tag,      // the tag is not this session's for this reply address and number
  bad_mac,      // the tag is right, the payload MAC is not (the payload was changed)
  mac_missing,  // authentic, but without the payload MAC the session requires
};
inline constexpr size_t kSessionVerdicts = 5;
[[nodiscard]] std::string_view session_verdict_name(SessionVerdict v) noexcept;

// Open a received packet (`msg`: header and payload, already parsed by parse_header) of the session whose
// incoming direction is `d` and whose window is `window`: infer the 64-bit number from the header's seq,
// check it against the window, verify the tag for `reply`, then the payload MAC when the mac flag is set
// (and require the flag when `require_mac`). Only an `ok` packet is committed to the window: a forged or
// altered one moves nothing. `seq_out`, when given, receives the inferred number.
[[nodiscard]] SessionVerdict open_session_packet(const SessionDirection& d, ReplayWindow& window,
                                                 std::span<const std::byte> msg, ReplyAddress reply,
                                                 bool require_mac, uint64_t* seq_out = nullptr) noexcept;

// The same checks, changing nothing: whether `msg` would open under `d` (a fresh window). For a packet that
// may belong to a session not yet confirmed (the server's pending one, after a join): its first packet.
[[nodiscard]] SessionVerdict try_session_packet(const SessionDirection& d, const ReplayWindow& window,
                                                std::span<const std::byte> msg, ReplyAddress reply,
                                                bool require_mac) noexcept;

}  // namespace phub::proto

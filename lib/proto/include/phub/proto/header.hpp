// The phub header: opcodes, flags, the 54-byte wire layout and its parse/build (no DPDK).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "phub/base/dtype.hpp"
#include "phub/base/expected.hpp"
#include "phub/proto/errors.hpp"

namespace phub::proto {

inline constexpr uint16_t kMagic = 0x5048;  // "PH"
inline constexpr uint8_t kVersion = 3;  // 2: job epoch, join handshake, pull/init answers labelled as results,
                                        // hub forwards (opcodes 4, 5 and 15, docs/hierarchy.md), hub state (14);
                                        // 3: join and joined carry the session handshake (handshake.hpp), the
                                        // mac flag, session tags and sequence numbers (session_packet.hpp);
                                        // later in 3: hyperparameter sets (opcode 16, hparams.hpp), the
                                        // nonfinite and tail flags, state arrays in pull/init/result
inline constexpr size_t kHeaderBytes = 54;  // Eth 14 + IPv4 20 + UDP 8 + 54 = 96: payload 32-byte aligned in a frame
// The payload of every join and joined (the session handshake, handshake.hpp): equal, so that answering a
// join never sends more bytes than it received.
inline constexpr size_t kHandshakePayloadBytes = 44;

enum class Opcode : uint8_t {
  push = 1,           // worker -> server: a gradient contribution for (chunk, round, elements)
  result = 2,         // server -> worker: the aggregated result (allreduce) or updated weights (ps)
  rerequest = 3,      // worker -> server: send me the result of (chunk, round) again
  fwd_partial = 4,    // rack hub -> home hub: its rack's fp32 partial sum of one piece (docs/hierarchy.md)
  fwd_result = 5,     // home hub -> rack hub: the result of one segment, for the rack hub's workers
  error = 6,          // server -> worker: status says why; aux carries detail (e.g. the server's round)
  join = 7,           // worker -> server: announce rank and address
  leave = 8,          // worker -> server: rank leaves the job
  probe_request = 9,  // probe agent -> peer: payload is the probe body (timestamps), echoed back
  probe_reply = 10,   // peer -> probe agent
  init = 11,          // rank 0 -> server (ps mode): initial weights of a chunk
  pull = 12,          // worker -> server (ps mode): send the current weights of a chunk
  joined = 13,        // server -> worker: answer to join; epoch = the job's epoch, aux = its first round
  hub_state = 14,     // hub <-> hub: a job's epoch and hierarchy fingerprint on one lcore (hub_state.hpp)
  fwd_init = 15,      // rack hub -> home hub (ps): rank 0's init of one segment, or with no elements a request
                      // for the chunk's weights (docs/hierarchy.md)
  hparams = 16,       // worker -> server (ps): a hyperparameter set (hparams.hpp); server -> worker: its
                      // acknowledgement, header only. chunk_id and elem_offset hold the set's id.
  fwd_hparams = 17,   // rack hub -> home hub (ps): a hyperparameter set its ranks use; home -> rack hub: the
                      // acknowledgement, no payload. chunk_id and elem_offset hold the set's id.
};
inline constexpr uint8_t kOpcodeMin = 1;
inline constexpr uint8_t kOpcodeMax = 17;

// Whether `op` is an opcode of this protocol version.
[[nodiscard]] constexpr bool opcode_assigned(uint8_t op) noexcept { return op >= kOpcodeMin && op <= kOpcodeMax; }

[[nodiscard]] std::string_view opcode_name(Opcode op) noexcept;

// Opcodes whose payload is elem_count elements of dtype.
[[nodiscard]] constexpr bool opcode_carries_elems(Opcode op) noexcept {
  return op == Opcode::push || op == Opcode::result || op == Opcode::init || op == Opcode::fwd_partial ||
         op == Opcode::fwd_result || op == Opcode::fwd_init;
}

// Hub-to-hub opcodes: their crc32c and aux fields hold a keyed payload MAC (auth.hpp, seal_fwd), not a CRC.
[[nodiscard]] constexpr bool opcode_is_forward(Opcode op) noexcept {
  return op == Opcode::fwd_partial || op == Opcode::fwd_result || op == Opcode::fwd_init ||
         op == Opcode::fwd_hparams;
}

// Opcodes that travel only between hubs: their payload is authenticated by the same MAC as a forward's.
[[nodiscard]] constexpr bool opcode_is_hub(Opcode op) noexcept {
  return opcode_is_forward(op) || op == Opcode::hub_state;
}

// Opcodes in which a worker carries its address cookie in aux (see address_cookie in auth.hpp).
[[nodiscard]] constexpr bool opcode_carries_cookie(Opcode op) noexcept {
  return op == Opcode::push || op == Opcode::init || op == Opcode::rerequest || op == Opcode::pull;
}

// Header flag bits. Unknown bits are rejected.
namespace flag {
inline constexpr uint16_t crc = 1u << 0;         // crc32c field holds CRC32C of the payload
inline constexpr uint16_t retransmit = 1u << 1;  // sender resent this packet after a timeout
inline constexpr uint16_t mean = 1u << 2;        // result: the payload is a mean, not a sum
inline constexpr uint16_t epoch_start = 1u << 3;   // join from rank 0: start the header's (newer) epoch
inline constexpr uint16_t fresh_weights = 1u << 4; // with epoch_start in a ps job: forget the weights too
inline constexpr uint16_t mac = 1u << 5;  // session packet: crc32c (high half) and aux (low half) hold a keyed
                                          // MAC of the payload (session_packet.hpp); never with crc
// ps push: this rank found NaN or Inf in this step's gradients, the round applies no update; ps result,
// fwd_result: the round was skipped, the weights are the previous round's; fwd_partial: a rank of the rack
// declared it. Elsewhere refused.
inline constexpr uint16_t nonfinite = 1u << 6;
// The payload ends with one big-endian u64 after the elem_count elements (kTailBytes): in a ps push or
// fwd_partial the id of the round's hyperparameter set (hparams.hpp); in an init or result of an optimizer
// state array (status 1..3, StateArray) the chunk's optimizer step count. Elsewhere refused.
inline constexpr uint16_t tail = 1u << 7;
// join: the sender follows the job's chunk-to-interface map (it moves to the address a joined names), so the
// lcore that receives a join for another lcore homed on another port may answer it with a redirect
// (handshake.hpp session_option::redirect) instead of handing it over. Elsewhere refused.
inline constexpr uint16_t follows_map = 1u << 8;
inline constexpr uint16_t known = crc | retransmit | mean | epoch_start | fresh_weights | mac | nonfinite | tail |
                                  follows_map;
}  // namespace flag

inline constexpr size_t kTailBytes = 8;

// The opcodes that may carry the nonfinite and tail flags (the engine checks the job's mode).
[[nodiscard]] constexpr bool opcode_may_flag_nonfinite(Opcode op) noexcept {
  return op == Opcode::push || op == Opcode::result || op == Opcode::fwd_partial || op == Opcode::fwd_result;
}
[[nodiscard]] constexpr bool opcode_may_carry_tail(Opcode op) noexcept {
  return op == Opcode::push || op == Opcode::fwd_partial || op == Opcode::init || op == Opcode::result;
}

// Which array of a ps chunk a pull, init or result carries, in its status field (0 elsewhere but in error).
enum class StateArray : uint8_t {
  weights = 0,  // the weights in the job's dtype: what a result of a round carries
  master = 1,   // the fp32 weights the optimizer updates
  moment1 = 2,  // fp32: the momentum buffer (momentum, nesterov) or Adam's exp_avg
  moment2 = 3,  // fp32: Adam's exp_avg_sq
};
inline constexpr uint8_t kStateArrayMax = 3;
[[nodiscard]] constexpr bool opcode_names_state_array(Opcode op) noexcept {
  return op == Opcode::pull || op == Opcode::init || op == Opcode::result;
}

// Status codes carried by Opcode::error (and 0 everywhere else).
enum class Status : uint8_t {
  ok = 0,
  round_ahead = 1,      // push for a round beyond the chunk's window; aux = server's round
  round_behind = 2,     // push for a round older than the kept result; aux = server's round
  round_stalled = 3,    // the round missed its deadline; aux = a rank still missing
  unknown_chunk = 4,    // chunk id or element range outside the job
  not_initialized = 5,  // ps mode: weights of this chunk not yet initialised by rank 0
  epoch_mismatch = 6,   // the packet's epoch is not the job's; aux = the job's epoch
  bad_request = 7,      // a well-formed packet the job cannot accept (dtype mismatch, wrong owner, ...)
  draining = 8,         // the operator drained the job (or a reload removes it): no new rounds start
  hparams_unknown = 9,  // ps: the push names a hyperparameter set this lcore does not hold: register it again
  hparams_mismatch = 10,  // ps: the push's hyperparameter set is not the one the round's other ranks sent
  nonfinite = 11,       // the push carries NaN or Inf it did not declare (the job refuses them); aux = the
                        // index of the first such element in the push
};
inline constexpr uint8_t kStatusMax = 11;

[[nodiscard]] std::string_view status_name(Status s) noexcept;

// The header in host byte order. Wire layout (all multi-byte fields big-endian):
//   0 magic u16 | 2 version u8 | 3 opcode u8 | 4 flags u16 | 6 dtype u8 | 7 status u8
//   8 job_id u32 | 12 rank u16 | 14 payload_bytes u16 | 16 round u32 | 20 chunk_id u32
//  24 elem_offset u32 | 28 elem_count u16 | 30 epoch u16 | 32 crc32c u32 | 36 aux u32
//  40 auth_tag u64 | 48 seq u32 | 52 reserved u16 (0)
struct Header {
  Opcode opcode = Opcode::push;
  uint16_t flags = 0;
  Dtype dtype = Dtype::fp32;
  Status status = Status::ok;
  uint32_t job_id = 0;
  uint16_t rank = 0;
  uint16_t payload_bytes = 0;
  uint32_t round = 0;
  uint32_t chunk_id = 0;
  uint32_t elem_offset = 0;  // elements from the start of the chunk
  uint16_t elem_count = 0;   // elements in this packet (data opcodes), or the requested range
  uint16_t epoch = 0;        // the job epoch the packet belongs to (see docs/protocol.md, "Epochs")
  uint32_t crc32c = 0;
  uint32_t aux = 0;
  uint64_t auth_tag = 0;
  uint32_t seq = 0;          // sender's packet sequence number (diagnostics, probe matching)

  friend bool operator==(const Header&, const Header&) = default;
};

// Epochs are compared as serial numbers (RFC 1982): a is newer than b when it is ahead by less than half
// the number space.
[[nodiscard]] constexpr bool epoch_newer(uint16_t a, uint16_t b) noexcept {
  return a != b && static_cast<uint16_t>(a - b) < 0x8000;
}

inline constexpr size_t kAuthTagOffset = 40;
inline constexpr size_t kCrcOffset = 32;
inline constexpr size_t kAuxOffset = 36;
inline constexpr size_t kSeqOffset = 48;

// A 64-bit keyed MAC carried in a header's crc32c (high half) and aux (low half) fields, big-endian: hub
// forwards (auth.hpp seal_fwd, hub_link.hpp) and session packets with payload MACs (session_packet.hpp).
void store_header_mac(std::span<std::byte, kHeaderBytes> wire, uint64_t mac) noexcept;
[[nodiscard]] uint64_t load_header_mac(std::span<const std::byte, kHeaderBytes> wire) noexcept;

// Parse and validate a phub header at the start of a UDP payload. Checks magic, version, opcode, dtype,
// flags, reserved fields, payload_bytes against the real remaining length, elem_count against the payload
// for data opcodes, and the CRC when the crc flag is set. Never reads past `udp_payload`.
[[nodiscard]] Expected<Header, ParseError> parse_header(std::span<const std::byte> udp_payload) noexcept;
// The same checks, filling `out` in place; returns the error, or nothing on success.
[[nodiscard]] std::optional<ParseError> parse_header_into(std::span<const std::byte> udp_payload, Header& out) noexcept;

// Write `h` in wire order into out[0..kHeaderBytes). `out` must hold kHeaderBytes.
void write_header(const Header& h, std::span<std::byte, kHeaderBytes> out) noexcept;
// Rewrite only where a written header sits in its stream (round, chunk, element offset, sequence number),
// leaving every other field, and the tag, as they are.
void write_header_position(uint32_t round, uint32_t chunk_id, uint32_t elem_offset, uint32_t seq,
                           std::span<std::byte, kHeaderBytes> out) noexcept;

// Rewrite only the epoch of a written header, leaving every other field, and the tag, as they are.
void write_header_epoch(uint16_t epoch, std::span<std::byte, kHeaderBytes> out) noexcept;

// Rewrite only the addressee's rank and the sequence number of a written header (the same message to
// every worker), leaving every other field, and the tag, as they are.
void write_header_recipient(uint16_t rank, uint32_t seq, std::span<std::byte, kHeaderBytes> out) noexcept;

// Header plus payload into `out`: fills payload_bytes (and crc32c when the crc flag is set), copies the
// payload. Returns the bytes written, or an error when `out` is too small or the payload does not fit.
[[nodiscard]] Expected<size_t, BuildError> build_message(Header h, std::span<const std::byte> payload,
                                                         std::span<std::byte> out) noexcept;

}  // namespace phub::proto

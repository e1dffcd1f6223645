// Parse, validate and write the 54-byte phub header.
#include "phub/proto/header.hpp"

#include <cstring>

#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/hparams.hpp"
#include "phub/proto/hub_state.hpp"

namespace phub::proto {
namespace {

constexpr size_t kOffMagic = 0, kOffVersion = 2, kOffOpcode = 3, kOffFlags = 4, kOffDtype = 6, kOffStatus = 7,
                 kOffJob = 8, kOffRank = 12, kOffPayloadBytes = 14, kOffRound = 16, kOffChunk = 20,
                 kOffElemOffset = 24, kOffElemCount = 28, kOffEpoch = 30, kOffAux = kAuxOffset, kOffSeq = kSeqOffset,
                 kOffReserved1 = 52;

}  // namespace

std::optional<ParseError> parse_header_into(std::span<const std::byte> udp_payload, Header& h) noexcept {
  if (udp_payload.size() < kHeaderBytes) return ParseError::header_too_short;
  const std::byte* p = udp_payload.data();
  if (load_be<uint16_t>(p + kOffMagic) != kMagic) return ParseError::bad_magic;
  if (static_cast<uint8_t>(p[kOffVersion]) != kVersion) return ParseError::bad_version;

  const auto op = static_cast<uint8_t>(p[kOffOpcode]);
  if (!opcode_assigned(op)) return ParseError::bad_opcode;
  const auto dtype = static_cast<uint8_t>(p[kOffDtype]);
  if (!dtype_valid(dtype)) return ParseError::bad_dtype;
  const auto status = static_cast<uint8_t>(p[kOffStatus]);
  if (status > kStatusMax) return ParseError::bad_status;

  h.opcode = static_cast<Opcode>(op);
  h.flags = load_be<uint16_t>(p + kOffFlags);
  if ((h.flags & ~flag::known) != 0) return ParseError::bad_flags;
  if ((h.flags & flag::mac) != 0 && (h.flags & flag::crc) != 0) return ParseError::bad_flags;
  if (((h.flags & flag::nonfinite) != 0 && !opcode_may_flag_nonfinite(h.opcode)) ||
      ((h.flags & flag::tail) != 0 && !opcode_may_carry_tail(h.opcode)) ||
      ((h.flags & flag::follows_map) != 0 && h.opcode != Opcode::join)) {
    return ParseError::bad_flags;
  }
  if (load_be<uint16_t>(p + kOffReserved1) != 0) return ParseError::reserved_nonzero;
  h.dtype = static_cast<Dtype>(dtype);
  h.status = static_cast<Status>(status);
  if (opcode_names_state_array(h.opcode) && status > kStateArrayMax) return ParseError::bad_status;
  // The optimizer's state arrays (master weights, moments) are fp32 whatever the job's dtype.
  if ((h.opcode == Opcode::init || h.opcode == Opcode::result) && status != 0 && h.dtype != Dtype::fp32) {
    return ParseError::bad_dtype;
  }
  h.job_id = load_be<uint32_t>(p + kOffJob);
  h.rank = load_be<uint16_t>(p + kOffRank);
  h.payload_bytes = load_be<uint16_t>(p + kOffPayloadBytes);
  h.round = load_be<uint32_t>(p + kOffRound);
  h.chunk_id = load_be<uint32_t>(p + kOffChunk);
  h.elem_offset = load_be<uint32_t>(p + kOffElemOffset);
  h.elem_count = load_be<uint16_t>(p + kOffElemCount);
  h.epoch = load_be<uint16_t>(p + kOffEpoch);
  h.crc32c = load_be<uint32_t>(p + kCrcOffset);
  h.aux = load_be<uint32_t>(p + kOffAux);
  h.auth_tag = load_be<uint64_t>(p + kAuthTagOffset);
  h.seq = load_be<uint32_t>(p + kOffSeq);

  if (h.payload_bytes != udp_payload.size() - kHeaderBytes) return ParseError::payload_length_mismatch;
  // A hub message's crc32c field is half of its payload MAC; a partial is the unrounded fp32 sum.
  if (opcode_is_hub(h.opcode) &&
      ((h.flags & (flag::crc | flag::mac)) != 0 || (h.opcode == Opcode::fwd_partial && h.dtype != Dtype::fp32))) {
    return ParseError::bad_forward;
  }
  if (opcode_carries_elems(h.opcode)) {
    const size_t tail = (h.flags & flag::tail) != 0 ? kTailBytes : 0;
    if (static_cast<size_t>(h.elem_count) * dtype_bytes(h.dtype) + tail != h.payload_bytes) {
      return ParseError::elem_count_mismatch;
    }
  } else if (h.opcode == Opcode::hparams || h.opcode == Opcode::fwd_hparams) {
    // A set (hparams.hpp), or none in an acknowledgement.
    if (h.payload_bytes != 0 && h.payload_bytes != kHparamsBytes) return ParseError::unexpected_payload;
  } else if (h.opcode == Opcode::hub_state) {
    if (!parse_hub_state(udp_payload.subspan(kHeaderBytes))) return ParseError::bad_hub_state;
  } else if (h.opcode == Opcode::join || h.opcode == Opcode::joined) {
    // The session handshake (handshake.hpp): a join and its answer are the same length.
    if (h.payload_bytes != kHandshakePayloadBytes) return ParseError::unexpected_payload;
  } else if (h.payload_bytes != 0 && h.opcode != Opcode::probe_request && h.opcode != Opcode::probe_reply) {
    return ParseError::unexpected_payload;
  }
  if ((h.flags & flag::crc) != 0 && crc32c(udp_payload.subspan(kHeaderBytes)) != h.crc32c) {
    return ParseError::bad_crc;
  }
  return std::nullopt;
}

Expected<Header, ParseError> parse_header(std::span<const std::byte> udp_payload) noexcept {
  Header h;
  if (auto e = parse_header_into(udp_payload, h)) return unexpected(*e);
  return h;
}

void write_header(const Header& h, std::span<std::byte, kHeaderBytes> out) noexcept {
  std::byte* p = out.data();
  store_be<uint16_t>(p + kOffMagic, kMagic);
  p[kOffVersion] = std::byte{kVersion};
  p[kOffOpcode] = static_cast<std::byte>(h.opcode);
  store_be<uint16_t>(p + kOffFlags, h.flags);
  p[kOffDtype] = static_cast<std::byte>(h.dtype);
  p[kOffStatus] = static_cast<std::byte>(h.status);
  store_be<uint32_t>(p + kOffJob, h.job_id);
  store_be<uint16_t>(p + kOffRank, h.rank);
  store_be<uint16_t>(p + kOffPayloadBytes, h.payload_bytes);
  store_be<uint32_t>(p + kOffRound, h.round);
  store_be<uint32_t>(p + kOffChunk, h.chunk_id);
  store_be<uint32_t>(p + kOffElemOffset, h.elem_offset);
  store_be<uint16_t>(p + kOffElemCount, h.elem_count);
  store_be<uint16_t>(p + kOffEpoch, h.epoch);
  store_be<uint32_t>(p + kCrcOffset, h.crc32c);
  store_be<uint32_t>(p + kOffAux, h.aux);
  store_be<uint64_t>(p + kAuthTagOffset, h.auth_tag);
  store_be<uint32_t>(p + kOffSeq, h.seq);
  store_be<uint16_t>(p + kOffReserved1, 0);
}

void write_header_position(uint32_t round, uint32_t chunk_id, uint32_t elem_offset, uint32_t seq,
                           std::span<std::byte, kHeaderBytes> out) noexcept {
  std::byte* p = out.data();
  store_be<uint32_t>(p + kOffRound, round);
  store_be<uint32_t>(p + kOffChunk, chunk_id);
  store_be<uint32_t>(p + kOffElemOffset, elem_offset);
  store_be<uint32_t>(p + kOffSeq, seq);
}

void write_header_epoch(uint16_t epoch, std::span<std::byte, kHeaderBytes> out) noexcept {
  store_be<uint16_t>(out.data() + kOffEpoch, epoch);
}

void write_header_recipient(uint16_t rank, uint32_t seq, std::span<std::byte, kHeaderBytes> out) noexcept {
  std::byte* p = out.data();
  store_be<uint16_t>(p + kOffRank, rank);
  store_be<uint32_t>(p + kOffSeq, seq);
}

Expected<size_t, BuildError> build_message(Header h, std::span<const std::byte> payload,
                                           std::span<std::byte> out) noexcept {
  if (payload.size() > UINT16_MAX - kHeaderBytes) return unexpected(BuildError::payload_too_large);
  if (out.size() < kHeaderBytes + payload.size()) return unexpected(BuildError::buffer_too_small);
  const size_t tail = (h.flags & flag::tail) != 0 ? kTailBytes : 0;
  if (opcode_carries_elems(h.opcode) && static_cast<size_t>(h.elem_count) * dtype_bytes(h.dtype) + tail != payload.size()) {
    return unexpected(BuildError::elem_count_mismatch);
  }
  h.payload_bytes = static_cast<uint16_t>(payload.size());
  if ((h.flags & flag::crc) != 0) h.crc32c = crc32c(payload);
  write_header(h, out.first<kHeaderBytes>());
  if (!payload.empty()) std::memcpy(out.data() + kHeaderBytes, payload.data(), payload.size());
  return kHeaderBytes + payload.size();
}

void store_header_mac(std::span<std::byte, kHeaderBytes> wire, uint64_t mac) noexcept {
  store_be<uint32_t>(wire.data() + kCrcOffset, static_cast<uint32_t>(mac >> 32));
  store_be<uint32_t>(wire.data() + kAuxOffset, static_cast<uint32_t>(mac));
}

uint64_t load_header_mac(std::span<const std::byte, kHeaderBytes> wire) noexcept {
  return uint64_t{load_be<uint32_t>(wire.data() + kCrcOffset)} << 32 | load_be<uint32_t>(wire.data() + kAuxOffset);
}

}  // namespace phub::proto

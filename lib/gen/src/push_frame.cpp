// Push frames: addresses, phub header, signature, payload.
#include "phub/gen/push_frame.hpp"

#include <cstring>

#include "phub/base/bytes.hpp"

namespace phub::gen {
namespace {

constexpr size_t kL234 = proto::kEthBytes + proto::kIpv4Bytes + proto::kUdpBytes;  // where the phub header starts
constexpr size_t kUdpDstPortAt = proto::kEthBytes + proto::kIpv4Bytes + 2;

// The UDP port of the server lcore that owns the slot.
uint16_t owner_port(const Workload& wl, const Slot& slot) noexcept {
  return static_cast<uint16_t>(wl.spec().port_base + slot.owner);
}

}  // namespace

std::span<const std::byte> push_payload(const Workload& wl, const Slot& slot, const PushOrder& o) noexcept {
  if (o.init) return wl.init_bytes(Workload::init_pattern(slot.chunk, slot.seg), slot.elems);
  return wl.push_bytes(pattern_index(o.round, slot.chunk, slot.seg), o.rank, slot.elems);
}

std::span<const std::byte> push_tail(const Workload& wl, const PushOrder& o) noexcept {
  return o.init ? std::span<const std::byte>() : wl.push_tail();
}

void write_push_headers(const Workload& wl, const WorkerAddrs& a, const Slot& slot, const PushOrder& o, uint32_t seq,
                        std::span<std::byte, proto::kFrameHeadersBytes> out) noexcept {
  const auto payload = push_payload(wl, slot, o);
  const auto tail = push_tail(wl, o);
  proto::Header h;
  h.opcode = o.init ? proto::Opcode::init : proto::Opcode::push;
  h.flags = static_cast<uint16_t>((o.retransmit ? proto::flag::retransmit : 0) | (tail.empty() ? 0 : proto::flag::tail));
  h.dtype = wl.spec().dtype;
  h.job_id = wl.spec().id;
  h.rank = o.rank;
  h.payload_bytes = static_cast<uint16_t>(payload.size() + tail.size());
  h.round = o.init ? 0 : wl.wire_round(o.round);
  h.chunk_id = slot.chunk;
  h.elem_offset = slot.elem_offset;
  h.elem_count = slot.elems;
  h.seq = seq;
  h.epoch = wl.epoch(slot.owner);
  if (wl.spec().crc) {
    h.flags |= proto::flag::crc;
    const bool whole = !o.init && slot.elems == wl.segment_elems() && tail.empty();
    h.crc32c = whole ? wl.push_crc(pattern_index(o.round, slot.chunk, slot.seg), o.rank) : proto::crc32c(payload, tail);
  }
  auto wire = out.subspan<kL234, proto::kHeaderBytes>();
  proto::write_header(h, wire);
  if (wl.signs_with_job_key()) proto::sign_header(wl.key(), wire);
  proto::write_eth_ipv4_udp(a.flow(o.rank, owner_port(wl, slot)), proto::kHeaderBytes + payload.size() + tail.size(), out.first<kL234>());
}

void patch_push_headers(const Workload& wl, const Slot& slot, const PushOrder& o, uint32_t seq,
                        std::span<std::byte, proto::kFrameHeadersBytes> out) noexcept {
  store_be<uint16_t>(out.data() + kUdpDstPortAt, owner_port(wl, slot));
  auto wire = out.subspan<kL234, proto::kHeaderBytes>();
  proto::write_header_position(wl.wire_round(o.round), slot.chunk, slot.elem_offset, seq, wire);
  proto::write_header_epoch(wl.epoch(slot.owner), wire);
  if (wl.signs_with_job_key()) proto::sign_header(wl.key(), wire);
}

size_t write_push_frame(const Workload& wl, const WorkerAddrs& a, const Slot& slot, const PushOrder& o, uint32_t seq,
                        std::span<std::byte> out) noexcept {
  const auto payload = push_payload(wl, slot, o);
  const auto tail = push_tail(wl, o);
  const size_t len = proto::kFrameHeadersBytes + payload.size() + tail.size();
  if (out.size() < len) return 0;
  write_push_headers(wl, a, slot, o, seq, out.first<proto::kFrameHeadersBytes>());
  std::memcpy(out.data() + proto::kFrameHeadersBytes, payload.data(), payload.size());
  if (!tail.empty()) std::memcpy(out.data() + proto::kFrameHeadersBytes + payload.size(), tail.data(), tail.size());
  return len;
}

size_t write_hparams_frame(const Workload& wl, const WorkerAddrs& a, uint16_t owner, uint32_t seq,
                           std::span<std::byte> out) noexcept {
  const size_t len = proto::kFrameHeadersBytes + proto::kHparamsBytes;
  if (out.size() < len) return 0;
  const uint64_t id = load_be<uint64_t>(wl.push_tail().data());
  proto::Header h;
  h.opcode = proto::Opcode::hparams;
  h.dtype = wl.spec().dtype;
  h.job_id = wl.spec().id;
  h.payload_bytes = static_cast<uint16_t>(proto::kHparamsBytes);
  h.chunk_id = static_cast<uint32_t>(id >> 32);
  h.elem_offset = static_cast<uint32_t>(id);
  h.seq = seq;
  h.epoch = wl.epoch(owner);
  auto wire = out.subspan(kL234).first<proto::kHeaderBytes>();
  proto::write_header(h, wire);
  if (wl.signs_with_job_key()) proto::sign_header(wl.key(), wire);
  std::memcpy(out.data() + proto::kFrameHeadersBytes, wl.hparams().data(), proto::kHparamsBytes);
  proto::write_eth_ipv4_udp(a.flow(0, static_cast<uint16_t>(wl.spec().port_base + owner)), proto::kHeaderBytes + proto::kHparamsBytes, out.first<kL234>());
  return len;
}

}  // namespace phub::gen

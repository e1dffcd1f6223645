// Session header tags (header, reply address, high sequence half) and payload MACs, by SipHash-2-4.
#include "phub/proto/session_tag.hpp"

#include "phub/base/bytes.hpp"

namespace phub::proto {

uint64_t session_tag(const AuthKey& tag_key, std::span<const std::byte, kHeaderBytes> wire, ReplyAddress reply,
                     uint32_t high) noexcept {
  std::byte in[kHeaderBytes + 10];  // 64 bytes: whole SipHash words
  copy_untagged_header(wire, std::span(in).first<kHeaderBytes>());
  store_be<uint32_t>(in + kHeaderBytes, reply.ipv4);
  store_be<uint16_t>(in + kHeaderBytes + 4, reply.udp_port);
  store_be<uint32_t>(in + kHeaderBytes + 6, high);
  return siphash24(tag_key, in);
}

void seal_session(const AuthKey& tag_key, std::span<std::byte, kHeaderBytes> wire, ReplyAddress reply,
                  uint64_t seq) noexcept {
  store_be<uint32_t>(wire.data() + kSeqOffset, seq_low(seq));
  store_be<uint64_t>(wire.data() + kAuthTagOffset, session_tag(tag_key, wire, reply, seq_high(seq)));
}

bool verify_session(const AuthKey& tag_key, std::span<const std::byte, kHeaderBytes> wire, ReplyAddress reply,
                    uint64_t seq) noexcept {
  if (load_be<uint32_t>(wire.data() + kSeqOffset) != seq_low(seq)) return false;
  return load_be<uint64_t>(wire.data() + kAuthTagOffset) == session_tag(tag_key, wire, reply, seq_high(seq));
}

uint64_t session_payload_mac(const AuthKey& mac_key, uint64_t seq, std::span<const std::byte> payload,
                             std::span<const std::byte> tail) noexcept {
  std::byte prefix[sizeof(uint64_t)];
  store_be<uint64_t>(prefix, seq);
  SipHasher h(mac_key);
  h.update(prefix);
  h.update(payload);
  h.update(tail);
  return h.finish();
}

}  // namespace phub::proto

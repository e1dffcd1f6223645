// Whole session packets: payload MAC, sequence number and session tag on the way out; window, tag and MAC
// on the way in.
#include "phub/proto/session_packet.hpp"

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

constexpr size_t kFlagsOffset = 4;

SessionVerdict examine(const SessionDirection& d, const ReplayWindow& window, std::span<const std::byte> msg,
                       ReplyAddress reply, bool require_mac, uint64_t& seq) noexcept {
  const auto wire = msg.first<kHeaderBytes>();
  seq = window.infer(load_be<uint32_t>(wire.data() + kSeqOffset));
  // infer() never yields a number behind the window, so a number that is not fresh was seen: a number
  // that fell behind reads as one 2^32 ahead, and its tag (binding the high half) fails.
  if (window.check(seq) != Replay::fresh) return SessionVerdict::replayed;
  if (!verify_session(d.tag, wire, reply, seq)) return SessionVerdict::bad_tag;
  const bool has_mac = (load_be<uint16_t>(wire.data() + kFlagsOffset) & flag::mac) != 0;
  if (!has_mac) return require_mac ? SessionVerdict::mac_missing : SessionVerdict::ok;
  return load_header_mac(wire) == session_payload_mac(d.mac, seq, msg.subspan(kHeaderBytes)) ? SessionVerdict::ok
                                                                          : SessionVerdict::bad_mac;
}

}  // namespace

void seal_session_packet(const SessionDirection& d, std::span<std::byte> msg, ReplyAddress reply, uint64_t seq,
                         bool mac) noexcept {
  seal_session_header(d, msg.first<kHeaderBytes>(), msg.subspan(kHeaderBytes), reply, seq, mac);
}

void seal_session_header(const SessionDirection& d, std::span<std::byte, kHeaderBytes> wire,
                         std::span<const std::byte> payload, ReplyAddress reply, uint64_t seq, bool mac) noexcept {
  seal_session_header(d, wire, payload, {}, reply, seq, mac);
}

void seal_session_header(const SessionDirection& d, std::span<std::byte, kHeaderBytes> wire,
                         std::span<const std::byte> payload, std::span<const std::byte> tail, ReplyAddress reply,
                         uint64_t seq, bool mac) noexcept {
  const auto flags = load_be<uint16_t>(wire.data() + kFlagsOffset);
  if (!mac) {
    // A packet sealed without a MAC never claims one (its crc32c and aux are not a MAC).
    store_be<uint16_t>(wire.data() + kFlagsOffset, static_cast<uint16_t>(flags & ~flag::mac));
  } else {
    store_be<uint16_t>(wire.data() + kFlagsOffset, static_cast<uint16_t>((flags & ~flag::crc) | flag::mac));
    store_header_mac(wire, session_payload_mac(d.mac, seq, payload, tail));
  }
  seal_session(d.tag, wire, reply, seq);
}

SessionVerdict open_session_packet(const SessionDirection& d, ReplayWindow& window, std::span<const std::byte> msg,
                                   ReplyAddress reply, bool require_mac, uint64_t* seq_out) noexcept {
  uint64_t seq = 0;
  const SessionVerdict v = examine(d, window, msg, reply, require_mac, seq);
  if (seq_out != nullptr) *seq_out = seq;
  if (v == SessionVerdict::ok) (void)window.commit(seq);
  return v;
}

SessionVerdict try_session_packet(const SessionDirection& d, const ReplayWindow& window, std::span<const std::byte> msg,
                                  ReplyAddress reply, bool require_mac) noexcept {
  uint64_t seq = 0;
  return examine(d, window, msg, reply, require_mac, seq);
}

std::string_view session_verdict_name(SessionVerdict v) noexcept {
  switch (v) {
    case SessionVerdict::ok: return "ok";
    case SessionVerdict::replayed: return "replayed";
    case SessionVerdict::bad_tag: return "bad_tag";
    case SessionVerdict::bad_mac: return "bad_mac";
    case SessionVerdict::mac_missing: return "mac_missing";
  }
  return "?";
}

}  // namespace phub::proto

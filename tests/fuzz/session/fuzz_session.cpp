// libFuzzer target for the sessions of lib/proto (issue 16): the join and joined payload parsers, the
// handshake's tag and accept checks over arbitrary messages, the anti-replay window over arbitrary sequence
// numbers, and opening and sealing whole session packets. Every input is tried as each of them.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session_packet.hpp"

using namespace phub::proto;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// What parses writes back byte for byte (the encodings have no slack), and a written value parses back.
void payloads(std::span<const std::byte> in) {
  if (auto join = parse_join_payload(in)) {
    std::array<std::byte, kJoinPayloadBytes> again{};
    write_join_payload(*join, again);
    check(std::memcmp(again.data(), in.data(), kJoinPayloadBytes) == 0);
    check(parse_join_payload(again) == join);
  }
  if (auto joined = parse_joined_payload(in)) {
    std::array<std::byte, kJoinedPayloadBytes> again{};
    write_joined_payload(*joined, again);
    check(std::memcmp(again.data(), in.data(), kJoinedPayloadBytes) == 0);
    check(parse_joined_payload(again) == joined);
  }
}

// The first 54 bytes as a header, the rest as its payload: whatever they are, the accept checks terminate;
// sealed under the key they verify, and are accepted exactly when opcode, length and form are right.
void message(std::span<const std::byte> in) {
  if (in.size() < kHeaderBytes) return;
  static const AuthKey key = handshake_key(derive_key("fuzz-secret-of-24-bytes!", 1));
  std::vector<std::byte> msg(in.begin(), in.end());
  auto wire = std::span(msg).first<kHeaderBytes>();
  const auto payload = std::span<const std::byte>(msg).subspan(kHeaderBytes);
  SessionNonce sent{};
  if (payload.size() >= 4 + kSessionNonceBytes) std::memcpy(sent.data(), payload.data() + 4, kSessionNonceBytes);
  (void)accept_join(key, wire, payload);
  (void)accept_joined(key, wire, payload, sent);

  seal_handshake(key, wire, payload);
  check(verify_handshake(key, wire, payload));
  const bool length_right = phub::load_be<uint16_t>(wire.data() + 14) == payload.size();
  const auto op = static_cast<uint8_t>(wire[3]);
  check(accept_join(key, wire, payload).has_value() ==
        (op == static_cast<uint8_t>(Opcode::join) && length_right && parse_join_payload(payload).has_value()));
  check(accept_joined(key, wire, payload, sent).has_value() ==
        (op == static_cast<uint8_t>(Opcode::joined) && length_right && parse_joined_payload(payload).has_value()));
  if (!payload.empty()) {
    msg.back() ^= std::byte{0x01};
    check(!verify_handshake(key, wire, payload));
  }
}

// Each 5 bytes: a low half (u32) and whether its packet's tag verified (bit 0). Against a set of what was
// committed: a fresh verdict never names a committed number, and a committed number is never fresh again.
void window(std::span<const std::byte> in) {
  ReplayWindow w;
  std::set<uint64_t> committed;
  for (size_t at = 0; at + 5 <= in.size(); at += 5) {
    const auto low = phub::load_be<uint32_t>(in.data() + at);
    const uint64_t seq = w.infer(low);
    check(static_cast<uint32_t>(seq) == low);
    const Replay verdict = w.check(seq);
    check(verdict != Replay::fresh || committed.count(seq) == 0);
    if ((static_cast<uint8_t>(in[at + 4]) & 1) == 0) continue;  // a forgery: never committed
    const uint64_t top = w.top();
    check(w.commit(seq) == verdict);
    if (verdict == Replay::fresh) committed.insert(seq);
    check(w.top() == (verdict == Replay::fresh && seq > top ? seq : top));
    check(w.check(seq) != Replay::fresh);
  }
}

// The input as a received session packet (header and payload): opening it under a session's keys, as it is,
// never succeeds unless it was sealed (a forgery of 64-bit tags is not found by a fuzzer); sealed, it opens
// once, its replay is refused, and a changed payload byte fails its MAC. Nothing that fails moves the window.
void session_packet(std::span<const std::byte> in) {
  if (in.size() < kHeaderBytes) return;
  static const SessionKeys keys = [] {
    SessionContext c;
    c.rank = 1;
    c.incarnation = 5;
    c.worker_nonce.fill(std::byte{3});
    c.server_nonce.fill(std::byte{9});
    return derive_session_keys(derive_key("fuzz-secret-of-24-bytes!", 1), c);
  }();
  const ReplyAddress reply{0xc6120002, 40000};
  const SessionDirection d = worker_to_server(keys);
  std::vector<std::byte> msg(in.begin(), in.end());
  ReplayWindow w;
  check(open_session_packet(d, w, msg, reply, false) != SessionVerdict::ok);
  check(w.top() == 0);
  const bool mac = msg.size() > kHeaderBytes && (msg[0] & std::byte{1}) != std::byte{0};
  const uint64_t seq = w.top() + 1 + phub::load_be<uint32_t>(msg.data() + kSeqOffset) % 1000;
  seal_session_packet(d, msg, reply, seq, mac);
  ReplayWindow fresh;
  const uint64_t top_before = fresh.top();
  if (mac && msg.size() > kHeaderBytes) {
    auto altered = msg;
    altered.back() ^= std::byte{0x10};
    check(open_session_packet(d, fresh, altered, reply, true) == SessionVerdict::bad_mac);
    check(fresh.top() == top_before);
  }
  check(open_session_packet(d, fresh, msg, reply, mac) == SessionVerdict::ok);
  check(open_session_packet(d, fresh, msg, reply, mac) == SessionVerdict::replayed);
  ReplayWindow other;
  check(open_session_packet(server_to_worker(keys), other, msg, reply, false) == SessionVerdict::bad_tag);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly sized heap buffer so that ASan catches any read past the end.
  std::vector<std::byte> in(size);
  if (size != 0) std::memcpy(in.data(), data, size);
  payloads(in);
  message(in);
  window(in);
  session_packet(in);
  return 0;
}

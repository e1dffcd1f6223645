// Encode, decode, tag and accept the session handshake's join and joined messages.
#include "phub/proto/handshake.hpp"

#include <sodium.h>

#include <algorithm>

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

constexpr size_t kOffVersion = 0, kOffReserved = 1, kOffOptions = 1, kReservedBytes = 3, kOffWorkerNonce = 4,
                 kOffServerNonce = kOffWorkerNonce + kSessionNonceBytes, kOffReplyIpv4 = 36, kOffReplyPort = 40,
                 kOffTailReserved = 42, kOffChallenge = kOffServerNonce,
                 kOffJoinPadding = kOffChallenge + kSessionNonceBytes;
constexpr size_t kOffPayloadBytes = 14;  // header field payload_bytes

void write_preamble(std::byte* p, uint8_t version = kHandshakeVersion) noexcept {
  p[kOffVersion] = std::byte{version};
  std::fill_n(p + kOffReserved, kReservedBytes, std::byte{0});
}

bool all_zero(std::span<const std::byte> bytes) noexcept {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

bool preamble_ok(const std::byte* p) noexcept {
  return (p[kOffVersion] == std::byte{kHandshakeVersion} || p[kOffVersion] == std::byte{kConfirmVersion}) &&
         all_zero(std::span(p + kOffReserved, kReservedBytes));
}

// A joined's preamble: its first reserved byte holds the options.
bool options_preamble_ok(const std::byte* p) noexcept {
  const auto options = static_cast<uint8_t>(p[kOffOptions]);
  const bool mac_without_session =
      (options & session_option::payload_mac) != 0 && (options & session_option::session) == 0;
  const bool redirect_with_more = (options & session_option::redirect) != 0 && options != session_option::redirect;
  return p[kOffVersion] == std::byte{kHandshakeVersion} && (options & ~session_option::known) == 0 &&
         !mac_without_session && !redirect_with_more && all_zero(std::span(p + kOffOptions + 1, kReservedBytes - 1));
}

SessionNonce nonce_at(const std::byte* p) noexcept {
  SessionNonce n;
  std::copy_n(p, kSessionNonceBytes, n.begin());
  return n;
}

// The parts of accept_join and accept_joined that do not depend on the payload's kind.
bool header_and_tag_ok(const AuthKey& key, std::span<const std::byte, kHeaderBytes> wire,
                       std::span<const std::byte> payload, Opcode expected) noexcept {
  return wire[3] == static_cast<std::byte>(expected) &&
         load_be<uint16_t>(wire.data() + kOffPayloadBytes) == payload.size() && verify_handshake(key, wire, payload);
}

}  // namespace

void write_join_payload(const JoinPayload& p, std::span<std::byte, kJoinPayloadBytes> out) noexcept {
  write_preamble(out.data(), p.confirm ? kConfirmVersion : kHandshakeVersion);
  std::copy(p.worker_nonce.begin(), p.worker_nonce.end(), out.data() + kOffWorkerNonce);
  if (p.confirm) {
    std::copy(p.server_nonce.begin(), p.server_nonce.end(), out.data() + kOffChallenge);
  } else {
    std::fill_n(out.data() + kOffChallenge, kSessionNonceBytes, std::byte{0});
  }
  std::fill(out.begin() + kOffJoinPadding, out.end(), std::byte{0});
}

std::optional<JoinPayload> parse_join_payload(std::span<const std::byte> payload) noexcept {
  if (payload.size() != kJoinPayloadBytes || !preamble_ok(payload.data())) return std::nullopt;
  JoinPayload p;
  p.confirm = payload[kOffVersion] == std::byte{kConfirmVersion};
  p.worker_nonce = nonce_at(payload.data() + kOffWorkerNonce);
  p.server_nonce = nonce_at(payload.data() + kOffChallenge);
  if (all_zero(p.worker_nonce) || all_zero(p.server_nonce) == p.confirm || !all_zero(payload.subspan(kOffJoinPadding))) {
    return std::nullopt;
  }
  return p;
}

void write_joined_payload(const JoinedPayload& p, std::span<std::byte, kJoinedPayloadBytes> out) noexcept {
  std::byte* o = out.data();
  write_preamble(o);
  o[kOffOptions] = std::byte{p.options};
  std::copy(p.worker_nonce.begin(), p.worker_nonce.end(), o + kOffWorkerNonce);
  std::copy(p.server_nonce.begin(), p.server_nonce.end(), o + kOffServerNonce);
  store_be<uint32_t>(o + kOffReplyIpv4, p.reply.ipv4);
  store_be<uint16_t>(o + kOffReplyPort, p.reply.udp_port);
  store_be<uint16_t>(o + kOffTailReserved, 0);
}

std::optional<JoinedPayload> parse_joined_payload(std::span<const std::byte> payload) noexcept {
  if (payload.size() != kJoinedPayloadBytes || !options_preamble_ok(payload.data())) return std::nullopt;
  const std::byte* in = payload.data();
  JoinedPayload p;
  p.options = static_cast<uint8_t>(in[kOffOptions]);
  p.worker_nonce = nonce_at(in + kOffWorkerNonce);
  p.server_nonce = nonce_at(in + kOffServerNonce);
  p.reply.ipv4 = load_be<uint32_t>(in + kOffReplyIpv4);
  p.reply.udp_port = load_be<uint16_t>(in + kOffReplyPort);
  const bool redirect = p.options == session_option::redirect;
  if (all_zero(p.worker_nonce) || all_zero(p.server_nonce) != redirect || p.reply.ipv4 == 0 || p.reply.udp_port == 0 ||
      load_be<uint16_t>(in + kOffTailReserved) != 0) {
    return std::nullopt;
  }
  return p;
}

uint64_t handshake_tag(const AuthKey& handshake_key, std::span<const std::byte, kHeaderBytes> wire,
                       std::span<const std::byte> payload) noexcept {
  std::byte header[kHeaderBytes];
  copy_untagged_header(wire, header);
  SipHasher h(handshake_key);
  h.update(header);
  h.update(payload);
  return h.finish();
}

void seal_handshake(const AuthKey& handshake_key, std::span<std::byte, kHeaderBytes> wire,
                    std::span<const std::byte> payload) noexcept {
  store_be<uint64_t>(wire.data() + kAuthTagOffset, handshake_tag(handshake_key, wire, payload));
}

bool verify_handshake(const AuthKey& handshake_key, std::span<const std::byte, kHeaderBytes> wire,
                      std::span<const std::byte> payload) noexcept {
  return load_be<uint64_t>(wire.data() + kAuthTagOffset) == handshake_tag(handshake_key, wire, payload);
}

std::optional<JoinPayload> accept_join(const AuthKey& handshake_key, std::span<const std::byte, kHeaderBytes> wire,
                                       std::span<const std::byte> payload) noexcept {
  if (!header_and_tag_ok(handshake_key, wire, payload, Opcode::join)) return std::nullopt;
  return parse_join_payload(payload);
}

std::optional<JoinedPayload> accept_joined(const AuthKey& handshake_key, std::span<const std::byte, kHeaderBytes> wire,
                                           std::span<const std::byte> payload, const SessionNonce& sent) noexcept {
  if (!header_and_tag_ok(handshake_key, wire, payload, Opcode::joined)) return std::nullopt;
  auto joined = parse_joined_payload(payload);
  if (!joined || sodium_memcmp(joined->worker_nonce.data(), sent.data(), kSessionNonceBytes) != 0) return std::nullopt;
  return joined;
}

SessionNonce join_challenge(const ChallengeKey& key, const ChallengeContext& c) noexcept {
  static constexpr char kLabel[] = "phub challenge v1";
  static_assert(sizeof kLabel == 18);
  std::byte msg[sizeof kLabel + 4 + 2 + 2 + 2 + 4 + 4 + 2 + kSessionNonceBytes];
  std::byte* o = msg;
  o = std::copy_n(reinterpret_cast<const std::byte*>(kLabel), sizeof kLabel, o);
  store_be<uint32_t>(o, c.job_id);
  store_be<uint16_t>(o + 4, c.lcore_index);
  store_be<uint16_t>(o + 6, c.rank);
  store_be<uint16_t>(o + 8, c.epoch);
  store_be<uint32_t>(o + 10, c.incarnation);
  store_be<uint32_t>(o + 14, c.source.ipv4);
  store_be<uint16_t>(o + 18, c.source.udp_port);
  std::copy(c.worker_nonce.begin(), c.worker_nonce.end(), o + 20);
  SessionNonce out{};
  crypto_generichash(reinterpret_cast<unsigned char*>(out.data()), out.size(), reinterpret_cast<const unsigned char*>(msg),
                     sizeof msg, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  if (all_zero(out)) out[0] = std::byte{1};  // a challenge is never all zero (that marks a first join)
  return out;
}

ChallengeKey draw_challenge_key() noexcept {
  ChallengeKey k;
  randombytes_buf(k.data(), k.size());
  return k;
}

}  // namespace phub::proto

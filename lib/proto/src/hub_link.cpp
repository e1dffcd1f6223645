// Keys, seals and checks of forwards between hub lcores.
#include "phub/proto/hub_link.hpp"

#include <sodium.h>

#include <algorithm>

#include "phub/base/bytes.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::proto {

AuthKey hub_link_key(const AuthKey& payload_key, const HubLinkContext& c) noexcept {
  static constexpr char kLabel[] = "phub hub link v1";
  static_assert(sizeof kLabel == 17);
  std::byte msg[sizeof kLabel + 4 + 2 + 2 + 2 + 4 + 4];
  std::byte* o = std::copy_n(reinterpret_cast<const std::byte*>(kLabel), sizeof kLabel, msg);
  store_be<uint32_t>(o, c.job_id);
  store_be<uint16_t>(o + 4, c.from_rack);
  store_be<uint16_t>(o + 6, c.to_rack);
  store_be<uint16_t>(o + 8, c.lcore_index);
  store_be<uint32_t>(o + 10, c.from_nonce);
  store_be<uint32_t>(o + 14, c.to_nonce);
  std::byte key[16];
  store_le<uint64_t>(key, payload_key.k0);
  store_le<uint64_t>(key + 8, payload_key.k1);
  std::byte out[16];
  crypto_generichash(reinterpret_cast<unsigned char*>(out), sizeof out, reinterpret_cast<const unsigned char*>(msg),
                     sizeof msg, reinterpret_cast<const unsigned char*>(key), sizeof key);
  sodium_memzero(key, sizeof key);
  return AuthKey{load_le<uint64_t>(out), load_le<uint64_t>(out + 8)};
}

void seal_link_forward(const AuthKey& job_key, const AuthKey& link_key, uint64_t seq,
                       std::span<std::byte, kHeaderBytes> wire, std::span<const std::byte> payload) noexcept {
  // The MAC of a numbered payload is the session packets' (session_tag.hpp), under the link's key.
  store_header_mac(wire, session_payload_mac(link_key, seq, payload));
  sign_header(job_key, wire);
}

LinkVerdict open_link_forward(const AuthKey& job_key, const AuthKey& link_key, ReplayWindow& window,
                              std::span<const std::byte, kHeaderBytes> wire, std::span<const std::byte> payload) noexcept {
  const uint64_t seq = window.infer(load_be<uint32_t>(wire.data() + kSeqOffset));
  if (!verify_header(job_key, wire)) return LinkVerdict::bad_mac;
  if (load_header_mac(wire) != session_payload_mac(link_key, seq, payload)) return LinkVerdict::bad_mac;
  return window.commit(seq) == Replay::fresh ? LinkVerdict::ok : LinkVerdict::replayed;
}

}  // namespace phub::proto

// Keys, seals and checks of forwards between hub lcores.
#include "phub/proto/hub_link.hpp"

#include <sodium.h>

#include <algorithm>

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

uint64_t link_mac(const AuthKey& link_key, uint64_t seq, std::span<const std::byte> payload) noexcept {
  std::byte number[8];
  store_be<uint64_t>(number, seq);
  SipHasher h(link_key);
  h.update(number);
  h.update(payload);
  return h.finish();
}

}  // namespace

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
  const uint64_t mac = link_mac(link_key, seq, payload);
  store_be<uint32_t>(wire.data() + kCrcOffset, static_cast<uint32_t>(mac >> 32));
  store_be<uint32_t>(wire.data() + kAuxOffset, static_cast<uint32_t>(mac));
  sign_header(job_key, wire);
}

LinkVerdict open_link_forward(const AuthKey& job_key, const AuthKey& link_key, ReplayWindow& window,
                              std::span<const std::byte, kHeaderBytes> wire, std::span<const std::byte> payload) noexcept {
  const uint64_t seq = window.infer(load_be<uint32_t>(wire.data() + kSeqOffset));
  if (!verify_header(job_key, wire)) return LinkVerdict::bad_mac;
  const uint64_t mac = uint64_t{load_be<uint32_t>(wire.data() + kCrcOffset)} << 32 | load_be<uint32_t>(wire.data() + kAuxOffset);
  if (mac != link_mac(link_key, seq, payload)) return LinkVerdict::bad_mac;
  return window.commit(seq) == Replay::fresh ? LinkVerdict::ok : LinkVerdict::replayed;
}

}  // namespace phub::proto

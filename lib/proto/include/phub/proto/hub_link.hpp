// Forwards between two hub lcores of a hierarchical job (docs/protocol.md, "Hub forwards"): each direction of
// a link has a key bound to both lcores' nonces for the job, which their hub_state messages exchange, and
// numbers its forwards from 1, 64 bits. So a forward recorded in another life of either hub opens under no
// key, and one recorded in this life (a round_modulus wrap repeats its epoch and round) is refused by the
// receiver's anti-replay window. Pure, no DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "phub/proto/auth.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/replay_window.hpp"

namespace phub::proto {

// Everything one direction of a link is bound to besides the job's forward payload key.
struct HubLinkContext {
  uint32_t job_id = 0;
  uint16_t from_rack = 0;    // the sending hub's rack index
  uint16_t to_rack = 0;      // the receiving hub's
  uint16_t lcore_index = 0;  // both ends' lcore position (a link joins the same lcore of two hubs)
  uint32_t from_nonce = 0;   // the sending lcore's nonce for the receiver (hub_state's nonce)
  uint32_t to_nonce = 0;     // the receiving lcore's nonce for the sender
};

// keyed BLAKE2b-128 (crypto_generichash) under the payload key (16 bytes, k0 then k1 little-endian) of
// "phub hub link v1" (17 bytes with its NUL), job_id u32, from_rack u16, to_rack u16, lcore_index u16,
// from_nonce u32, to_nonce u32, all big-endian.
[[nodiscard]] AuthKey hub_link_key(const AuthKey& payload_key, const HubLinkContext& context) noexcept;

// Seal a written forward header numbered `seq` (its seq field must hold the low 32 bits): SipHash-2-4 under
// `link_key` of seq (u64, big-endian) then the payload goes into crc32c (high half) and aux (low half), then
// the header is signed under the job key (the tag covers both).
void seal_link_forward(const AuthKey& job_key, const AuthKey& link_key, uint64_t seq,
                       std::span<std::byte, kHeaderBytes> wire, std::span<const std::byte> payload) noexcept;

enum class LinkVerdict : uint8_t {
  ok,        // authentic and not seen before: the window took its number
  bad_mac,   // the tag or the MAC is wrong (another life's key, an altered or forged forward)
  replayed,  // authentic, but its number was seen already or is behind the window
};

// The receiver's whole check of a forward's authenticity and freshness: the number inferred from the header's
// low half and the window, the header tag, the MAC, then the window. Changes the window only when ok.
[[nodiscard]] LinkVerdict open_link_forward(const AuthKey& job_key, const AuthKey& link_key, ReplayWindow& window,
                                            std::span<const std::byte, kHeaderBytes> wire,
                                            std::span<const std::byte> payload) noexcept;

}  // namespace phub::proto

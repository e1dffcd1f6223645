// The payload of a hub_state message (opcode 14, docs/protocol.md "Hub state"): what one lcore of a hub
// tells the same lcore of a peer hub about a hierarchical job. Its epoch is the header's; the payload
// carries the hierarchy's fingerprint, the freshness nonces and the epoch's start. Pure, no DPDK.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace phub::proto {

inline constexpr size_t kHubStateBytes = 72;
inline constexpr size_t kHubFingerprintParts = 5;  // racks, ranks, layout, arithmetic, optimizer

namespace hub_state_flag {
inline constexpr uint32_t fresh_weights = 1u << 0;  // the epoch started with fresh weights (ps)
inline constexpr uint32_t known = fresh_weights;
}  // namespace hub_state_flag

// Wire layout (big-endian): 0 fingerprint 5 x u64 | 40 nonce u32 | 44 echo u32 | 48 rank0_holder u32 |
// 52 first_round u32 | 56 flags u32 | 60 reserved u32 (0) | 64 life u64.
struct HubState {
  std::array<uint64_t, kHubFingerprintParts> fingerprint{};
  uint32_t nonce = 0;         // the sending lcore's nonce for this server run (never 0)
  uint32_t echo = 0;          // the last nonce the sender received from the addressee (0: none yet)
  uint32_t rank0_holder = 0;  // the incarnation that holds rank 0 in the header's epoch (0: none)
  uint32_t first_round = 0;   // the header's epoch's first round
  uint32_t flags = 0;         // hub_state_flag
  // When the sending lcore took up the job (its realtime clock, ns; never 0): a later life of a hub has a
  // larger one, so that a message of an earlier life, replayed, cannot replace the nonce of a later one.
  uint64_t life = 0;

  friend bool operator==(const HubState&, const HubState&) = default;
};

void write_hub_state(const HubState& s, std::span<std::byte, kHubStateBytes> out) noexcept;
// Nothing if the payload is not kHubStateBytes, its nonce or life is 0, or it has unknown flags or reserved bits.
[[nodiscard]] std::optional<HubState> parse_hub_state(std::span<const std::byte> payload) noexcept;

}  // namespace phub::proto

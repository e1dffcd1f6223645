// Encode and decode the hub_state payload.
#include "phub/proto/hub_state.hpp"

#include "phub/base/bytes.hpp"

namespace phub::proto {
namespace {

constexpr size_t kOffNonce = 40, kOffEcho = 44, kOffHolder = 48, kOffFirstRound = 52, kOffFlags = 56,
                 kOffReserved = 60, kOffLife = 64;

}  // namespace

void write_hub_state(const HubState& s, std::span<std::byte, kHubStateBytes> out) noexcept {
  std::byte* p = out.data();
  for (size_t i = 0; i < kHubFingerprintParts; ++i) store_be<uint64_t>(p + 8 * i, s.fingerprint[i]);
  store_be<uint32_t>(p + kOffNonce, s.nonce);
  store_be<uint32_t>(p + kOffEcho, s.echo);
  store_be<uint32_t>(p + kOffHolder, s.rank0_holder);
  store_be<uint32_t>(p + kOffFirstRound, s.first_round);
  store_be<uint32_t>(p + kOffFlags, s.flags);
  store_be<uint32_t>(p + kOffReserved, 0);
  store_be<uint64_t>(p + kOffLife, s.life);
}

std::optional<HubState> parse_hub_state(std::span<const std::byte> payload) noexcept {
  if (payload.size() != kHubStateBytes) return std::nullopt;
  const std::byte* p = payload.data();
  HubState s;
  for (size_t i = 0; i < kHubFingerprintParts; ++i) s.fingerprint[i] = load_be<uint64_t>(p + 8 * i);
  s.nonce = load_be<uint32_t>(p + kOffNonce);
  s.echo = load_be<uint32_t>(p + kOffEcho);
  s.rank0_holder = load_be<uint32_t>(p + kOffHolder);
  s.first_round = load_be<uint32_t>(p + kOffFirstRound);
  s.flags = load_be<uint32_t>(p + kOffFlags);
  s.life = load_be<uint64_t>(p + kOffLife);
  if (s.nonce == 0 || s.life == 0 || (s.flags & ~hub_state_flag::known) != 0 || load_be<uint32_t>(p + kOffReserved) != 0) {
    return std::nullopt;
  }
  return s;
}

}  // namespace phub::proto

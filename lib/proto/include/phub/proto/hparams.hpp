// A ps job's hyperparameter set (docs/protocol.md, "Hyperparameters"): the values one parameter group's
// optimizer step uses, sent once per lcore in an `hparams` message and named by its id in every push of a
// round (the tail, header.hpp). The id is a hash of the set's bytes, so equal ids are equal sets and the
// ranks of a round agree exactly when their pushes name the same id.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace phub::proto {

// The torch optimizer class a set is for: SGD (plain, momentum or Nesterov by its values), Adam, AdamW.
enum class HparamsFamily : uint8_t { sgd = 0, adam = 1, adamw = 2 };
inline constexpr uint8_t kHparamsFamilyMax = 2;

struct Hparams {
  HparamsFamily family = HparamsFamily::sgd;
  bool nesterov = false;      // sgd
  double lr = 0.0;
  double momentum = 0.0;      // sgd
  double beta1 = 0.0;         // adam, adamw
  double beta2 = 0.0;         // adam, adamw
  double eps = 0.0;           // adam, adamw
  double weight_decay = 0.0;  // sgd and adam: L2 added to the gradient; adamw: decoupled
  friend bool operator==(const Hparams&, const Hparams&) = default;
};

// Wire form, big-endian: version u8 (1), family u8, flags u8 (bit 0 nesterov), reserved u8 and u32 (0), then
// lr, momentum, beta1, beta2, eps, weight_decay as IEEE binary64.
inline constexpr size_t kHparamsBytes = 56;
inline constexpr uint8_t kHparamsVersion = 1;
using HparamsWire = std::array<std::byte, kHparamsBytes>;

[[nodiscard]] HparamsWire encode_hparams(const Hparams& h) noexcept;
// The set in `payload`, or nullopt: another length, version, family, unknown flags, reserved bits, or a value
// hparams_refusal refuses.
[[nodiscard]] std::optional<Hparams> parse_hparams(std::span<const std::byte> payload) noexcept;

// Empty when the values are ones torch's optimizer of the family accepts (lr, momentum, weight_decay, eps >= 0,
// 0 <= beta < 1, Nesterov only with momentum > 0, every value finite, the other family's values 0); else why,
// naming the value.
[[nodiscard]] std::string hparams_refusal(const Hparams& h);

// The set's id: SipHash-2-4 of its wire bytes under a fixed public key, never 0 (0 names no set: a push
// without a tail runs on the job's configured optimizer).
[[nodiscard]] uint64_t hparams_id(std::span<const std::byte, kHparamsBytes> wire) noexcept;
[[nodiscard]] inline uint64_t hparams_id(const Hparams& h) noexcept { return hparams_id(encode_hparams(h)); }

// The id travels in the header of hparams and fwd_hparams messages as chunk_id (high half) and elem_offset.
[[nodiscard]] constexpr uint64_t id_of_fields(uint32_t chunk_id, uint32_t elem_offset) noexcept {
  return (uint64_t{chunk_id} << 32) | elem_offset;
}

}  // namespace phub::proto

// The emulated gradients: a few value patterns per job, chosen so that the expected result is known.
//
// Worker `rank` pushes, for element i of a segment, pattern_value(k, rank, i) where the pattern index k
// depends on (round, chunk, segment). With Values::exact the values are small integers
// (base[k][i] + ((rank % 3) - 1)), so every sum is exact in fp32 and representable in the pushed dtype
// whatever the order; with Values::order_sensitive they are m * 2^e with very different exponents, so
// the fp32 sum depends on the summation order and only a rank-order (deterministic) sum matches.
#pragma once

#include <cstdint>
#include <span>

#include "phub/base/dtype.hpp"
#include "phub/gen/job_spec.hpp"

namespace phub::gen {

inline constexpr uint32_t kPatterns = 4;

// Consecutive rounds, chunks and segments use different patterns, so a stale or misplaced result differs.
[[nodiscard]] constexpr uint32_t pattern_index(uint64_t logical_round, uint32_t chunk, uint32_t seg) noexcept {
  return static_cast<uint32_t>((logical_round + chunk + seg) % kPatterns);
}

// Values of `rank`'s push for pattern k, elements [0, out.size()); each is exactly representable in d.
void fill_push_values(Values v, Dtype d, uint16_t workers, uint32_t k, uint16_t rank, std::span<float> out) noexcept;

// Initial ps weights for pattern k (small dyadic fractions, exact in fp32).
void fill_init_weights(uint32_t k, std::span<float> out) noexcept;

}  // namespace phub::gen

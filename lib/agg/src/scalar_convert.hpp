// Bit-exact scalar fp16/bf16 <-> fp32 conversions, matching F16C and the vector bf16 code bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

namespace phub::agg::detail {

static inline float bits_to_float(uint32_t bits) noexcept {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint32_t float_to_bits(float f) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Exact. NaN keeps sign and payload and is quietened, as VCVTPH2PS does.
static inline float half_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000U) << 16;
  const uint32_t exp = (h >> 10) & 0x1fU;
  const uint32_t mant = h & 0x3ffU;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000U | (mant << 13) | (mant != 0 ? 0x400000U : 0U));
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in fp32.
  return bits_to_float(sign | float_to_bits(static_cast<float>(mant) * 0x1p-24F));
}

// Round to nearest even; overflow to inf; subnormal results kept. NaN: quiet, top payload bits kept (VCVTPS2PH).
static inline uint16_t float_to_half(float f) noexcept {
  const uint32_t bits = float_to_bits(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000U);
  const uint32_t mag = bits & 0x7fffffffU;
  if (mag > 0x7f800000U) return static_cast<uint16_t>(sign | 0x7e00U | ((mag >> 13) & 0x3ffU));
  if (mag >= 0x477ff000U) return static_cast<uint16_t>(sign | 0x7c00U);  // >= 65520 rounds past 65504
  if (mag >= 0x38800000U) {                                                // normal half
    const uint32_t rounded = mag + 0xfffU + ((mag >> 13) & 1U);
    return static_cast<uint16_t>(sign | ((rounded >> 13) - (112U << 10)));
  }
  const uint32_t exp = mag >> 23;
  if (exp < 102) return sign;  // below 2^-25: rounds to zero
  // Subnormal half: (mantissa with implicit bit) * 2^(exp - 126) half-ulps, rounded to nearest even.
  const uint32_t mant = (mag & 0x7fffffU) | 0x800000U;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1U << shift) - 1);
  const uint32_t half_ulp = 1U << (shift - 1);
  if (rem > half_ulp || (rem == half_ulp && (q & 1U) != 0)) ++q;
  return static_cast<uint16_t>(sign | q);
}

static inline float bf16_to_float(uint16_t h) noexcept { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest even (carry into the exponent gives inf on overflow). NaN: quiet, top payload bits kept.
static inline uint16_t float_to_bf16(float f) noexcept {
  const uint32_t bits = float_to_bits(f);
  if ((bits & 0x7fffffffU) > 0x7f800000U) return static_cast<uint16_t>((bits >> 16) | 0x40U);
  return static_cast<uint16_t>((bits + 0x7fffU + ((bits >> 16) & 1U)) >> 16);
}

}  // namespace phub::agg::detail

// Deterministic pseudo-random gradient values with exactly known sums (see values.hpp).
#include "phub/gen/values.hpp"

#include <algorithm>
#include <cmath>

namespace phub::gen {
namespace {

uint64_t mix(uint64_t x) noexcept {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) noexcept { return mix(mix(mix(a) ^ b) ^ c); }

// Largest integer n such that every integer in [-n, n] is exact in d.
int64_t exact_int_limit(Dtype d) noexcept {
  switch (d) {
    case Dtype::fp32: return int64_t{1} << 24;
    case Dtype::fp16: return 2048;
    case Dtype::bf16: return 256;
  }
  return 256;
}

}  // namespace

void fill_push_values(Values v, Dtype d, uint16_t workers, uint32_t k, uint16_t rank, std::span<float> out) noexcept {
  const uint16_t w = std::max<uint16_t>(workers, 1);
  if (v == Values::exact) {
    // |sum| <= amplitude * workers + 1 (the rank offsets -1, 0, 1 cancel in threes) stays exact in d.
    const int64_t amplitude = std::clamp<int64_t>((exact_int_limit(d) - 1) / w, 0, 2);
    const int offset = static_cast<int>(rank % 3) - 1;
    for (size_t i = 0; i < out.size(); ++i) {
      const auto span = static_cast<uint64_t>(2 * amplitude + 1);
      const auto base = static_cast<int64_t>(hash3(k, i, 0x5eed) % span) - amplitude;
      out[i] = static_cast<float>(base + offset);
    }
    return;
  }
  // Per element, two ranks push +B and -B (B = m * 2^hi) and the others small values m * 2^lo, |m| <= 127
  // (exact in bf16). Whatever precedes the cancelling pair is partly absorbed by the large partial sum, so
  // the small result depends strongly on the order. fp16 keeps B below its 65504 limit.
  const int hi_lo = d == Dtype::fp16 ? 7 : 14, hi_hi = d == Dtype::fp16 ? 8 : 18;
  const int lo_lo = d == Dtype::fp16 ? -10 : -8, lo_hi = d == Dtype::fp16 ? -6 : -2;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t pair = hash3(k, i, 0xb16);
    const auto a = static_cast<uint16_t>(pair % w);
    const auto b = static_cast<uint16_t>((a + 1 + (pair >> 16) % std::max<uint16_t>(w - 1, 1)) % w);
    const uint64_t h = hash3(k, i, 0x10000ull + rank);
    const int m = static_cast<int>(h % 127) + 1;
    if (w >= 2 && (rank == a || rank == b)) {
      const int e = hi_lo + static_cast<int>((pair >> 32) % static_cast<uint64_t>(hi_hi - hi_lo + 1));
      const int big = static_cast<int>((pair >> 40) % 127) + 1;
      out[i] = (rank == a ? 1.0f : -1.0f) * std::ldexp(static_cast<float>(big), e);
      continue;
    }
    const int e = lo_lo + static_cast<int>((h >> 8) % static_cast<uint64_t>(lo_hi - lo_lo + 1));
    const float sign = ((h >> 20) & 1) != 0 ? -1.0f : 1.0f;
    out[i] = sign * std::ldexp(static_cast<float>(m), e);
  }
}

void fill_init_weights(uint32_t k, std::span<float> out) noexcept {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(static_cast<int64_t>(hash3(k, i, 0x1417) % 2001) - 1000) / 1024.0f;
  }
}

}  // namespace phub::gen

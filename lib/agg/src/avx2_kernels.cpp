// AVX2 + F16C kernels: 8 floats per vector (built with -mavx2 -mf16c; no FMA, to stay bit-identical).
#include <immintrin.h>

#include "bf16_vector.hpp"
#include "kernel_table.hpp"
#include "tables.hpp"

namespace phub::agg::detail {
namespace {

struct Avx2 {
  using V = __v8sf;  // __m256 without may_alias, which a template argument would drop (-Wignored-attributes)
  static constexpr size_t kLanes = 8;

  static V from_fp16(const std::byte* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void to_fp16(std::byte* p, V x) noexcept {  // F16C rounds to nearest even, NaN stays NaN
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static V sqrt(V x) noexcept { return _mm256_sqrt_ps(x); }

  // The (even, odd) split of 2 * kLanes fp32 values that the bf16 tall sum works in, and its inverse.
  static Pair<V> f32_even_odd(const float* p) noexcept {
    const V lo = _mm256_loadu_ps(p);          // elements 0..7
    const V hi = _mm256_loadu_ps(p + 8);      // elements 8..15
    // In-lane shuffles give [0 2 8 10 | 4 6 12 14]; the 64-bit permute restores the order.
    const V even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    const V odd = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    return {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0))),
            _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), _MM_SHUFFLE(3, 1, 2, 0)))};
  }
  static void store_interleaved(float* p, Pair<V> x) noexcept {
    const V lo = _mm256_unpacklo_ps(x.a, x.b);  // [0 1 2 3 | 8 9 10 11]
    const V hi = _mm256_unpackhi_ps(x.a, x.b);  // [4 5 6 7 | 12 13 14 15]
    _mm256_storeu_ps(p, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
};

}  // namespace

const Kernels& avx2_kernels() noexcept {
  static constexpr Kernels kTable = make_kernels<Avx2>(Isa::avx2, "avx2");
  return kTable;
}

}  // namespace phub::agg::detail

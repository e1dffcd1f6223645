// AVX-512 kernels: 16 floats per vector (built with -mavx512f/bw/vl/dq -mf16c; no FMA, to stay bit-identical).
// GCC 12's AVX-512 intrinsics seed results with `__m512 __Y = __Y;` (_mm512_undefined_*), which
// -Wuninitialized reports at every inlined use; the values are never read (a GCC 12 issue).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "bf16_vector.hpp"
#include "kernel_table.hpp"
#include "tables.hpp"

namespace phub::agg::detail {
namespace {

struct Avx512 {
  using V = __v16sf;  // __m512 without may_alias, which a template argument would drop (-Wignored-attributes)
  static constexpr size_t kLanes = 16;

  static V sqrt(V x) noexcept { return _mm512_sqrt_ps(x); }
  static V from_fp16(const std::byte* p) noexcept {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void to_fp16(std::byte* p, V x) noexcept {  // rounds to nearest even, NaN stays NaN
    const __m256i halves = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), halves);
  }

  // The (even, odd) split of 2 * kLanes fp32 values that the bf16 tall sum works in, and its inverse.
  static Pair<V> f32_even_odd(const float* p) noexcept {
    const V lo = _mm512_loadu_ps(p);
    const V hi = _mm512_loadu_ps(p + 16);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return {_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi)};
  }
  static void store_interleaved(float* p, Pair<V> x) noexcept {
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    _mm512_storeu_ps(p, _mm512_permutex2var_ps(x.a, first, x.b));
    _mm512_storeu_ps(p + 16, _mm512_permutex2var_ps(x.a, second, x.b));
  }
};

}  // namespace

const Kernels& avx512_kernels() noexcept {
  static constexpr Kernels kTable = make_kernels<Avx512>(Isa::avx512, "avx512");
  return kTable;
}

}  // namespace phub::agg::detail

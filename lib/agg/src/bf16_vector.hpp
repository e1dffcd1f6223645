// bf16 <-> fp32 on compiler vector types for the vector ISAs (their .cpp includes this, the scalar one not):
// shifts, masks and packs only, so bit-exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernel_body.hpp"

namespace phub::agg::detail {
namespace {  // internal linkage: instantiated with each ISA's flags in its own object

// Integer vectors as wide as a float vector. Specialisations with fixed sizes, and overloads rather than
// templates below: GCC 12 drops a dependent vector_size and rejects __builtin_convertvector on dependent types.
template <size_t kBytes>
struct IntVec;
template <>
struct IntVec<32> {
  typedef uint32_t U32 __attribute__((vector_size(32)));
  typedef uint16_t U16 __attribute__((vector_size(16)));
};
template <>
struct IntVec<64> {
  typedef uint32_t U32 __attribute__((vector_size(64)));
  typedef uint16_t U16 __attribute__((vector_size(32)));
};

// The low 16 bits of each lane, packed.
inline IntVec<32>::U16 low_halves(IntVec<32>::U32 x) { return __builtin_convertvector(x, IntVec<32>::U16); }
inline IntVec<64>::U16 low_halves(IntVec<64>::U32 x) { return __builtin_convertvector(x, IntVec<64>::U16); }

template <class V>
struct Bf16Vector {
  using U32 = typename IntVec<sizeof(V)>::U32;

  // Two vectors' worth of elements as (even, odd) elements: a shift and a mask, no widening shuffle. The tall
  // sum adds these and interleaves once at the end.
  static Pair<V> widen_even_odd(const std::byte* p) {
    U32 x;
    std::memcpy(&x, p, sizeof x);
    return {__builtin_bit_cast(V, x << 16), __builtin_bit_cast(V, x & 0xffff0000U)};
  }

  // Round to nearest even (bits + 0x7fff + lsb; the carry makes overflow inf); NaN keeps its top bits, quietened.
  // (AVX512_BF16's VCVTNEPS2BF16 would flush subnormals, so it is not used.)
  static void narrow(std::byte* p, V x) {
    const U32 bits = __builtin_bit_cast(U32, x);
    const U32 high = bits >> 16;
    const U32 rounded = (bits + 0x7fffU + (high & 1U)) >> 16;
    const U32 is_nan = __builtin_bit_cast(U32, x != x);
    const auto packed = low_halves((is_nan & (high | 0x40U)) | (~is_nan & rounded));
    std::memcpy(p, &packed, sizeof packed);
  }
};

}  // namespace
}  // namespace phub::agg::detail

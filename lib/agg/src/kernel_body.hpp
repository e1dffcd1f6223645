// Sum, scale and conversion kernels written once over a per-ISA traits type (and the loop helpers they share).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "phub/agg/kernels.hpp"

namespace phub::agg::detail {

// Traits contract. Each ISA file defines its traits in an anonymous namespace, so every instantiation below
// has internal linkage and code compiled for one ISA is never merged into another ISA's (or the baseline's)
// callers. For the same reason this file calls no std:: templates, only memcpy/memset.
//   using V;  static constexpr size_t kLanes;  static V sqrt(V x);
//   static V from_fp16(const std::byte* p);  static void to_fp16(std::byte* p, V x);  // any alignment
// Scalar (kLanes == 1) also reads the little-endian wire format itself: from_fp32 / from_bf16 / to_bf16.
// Vector ISAs (x86, little-endian) load fp32 with plain vector loads, use Bf16Vector and, for 2*kLanes
// elements, provide the (even, odd) split of fp32 values and its inverse:
//   static Pair<V> f32_even_odd(const float* p);  static void store_interleaved(float* p, Pair<V> x);
// Arithmetic is IEEE +, *, / on V (and V with float), each rounded once: the TUs use -ffp-contract=off.
namespace {  // internal linkage, like the traits
template <class V>
struct Pair {
  V a, b;
  friend Pair operator+(Pair x, Pair y) { return {x.a + y.a, x.b + y.b}; }
};

template <class V>
struct Bf16Vector;  // bf16_vector.hpp, included by the vector ISAs only
}  // namespace

template <class Tr>
struct Body {
  using V = typename Tr::V;
  using Block = Pair<V>;  // 2 * kLanes elements, the unit of the tall loop
  static constexpr size_t kLanes = Tr::kLanes;
  static constexpr size_t kVecBytes = kLanes * sizeof(float);
  static constexpr size_t kMaxGroup = 8;      // contributions summed per pass; more go in further passes
  static constexpr size_t kBlockElems = 2048;  // dst block (8 KB) kept in L1 across those passes

  static constexpr size_t min_elems(size_t a, size_t b) noexcept { return a < b ? a : b; }

  // Host floats: plain (unaligned) vector moves.
  static V load_f32(const void* p) {
    V x;
    std::memcpy(&x, p, sizeof x);
    return x;
  }
  static void store(float* p, V x) { std::memcpy(p, &x, sizeof x); }

  template <Dtype D>
  static V load(const std::byte* p) {
    if constexpr (D == Dtype::fp32 && kLanes > 1) {
      return load_f32(p);
    } else if constexpr (D == Dtype::fp32) {
      return Tr::from_fp32(p);
    } else if constexpr (D == Dtype::fp16) {
      return Tr::from_fp16(p);
    } else {
      return Tr::from_bf16(p);  // scalar only: vector ISAs sum bf16 as (even, odd) blocks
    }
  }

  template <Dtype D>
  static void store_narrow(std::byte* p, V x) {
    if constexpr (D == Dtype::fp16) {
      Tr::to_fp16(p, x);
    } else if constexpr (kLanes == 1) {
      Tr::to_bf16(p, x);
    } else {
      Bf16Vector<V>::narrow(p, x);
    }
  }

  // full(i) for runs of kStep elements starting where align_ref + i is vector-aligned; part(i, count) with
  // count < kStep for the unaligned head and the tail.
  template <size_t kStep, class Full, class Part>
  static void sweep(const float* align_ref, size_t n, Full&& full, Part&& part) {
    const size_t misalign_bytes = reinterpret_cast<uintptr_t>(align_ref) % kVecBytes;
    size_t i = min_elems(n, ((kVecBytes - misalign_bytes) % kVecBytes) / sizeof(float));
    if (i != 0) part(size_t{0}, i);
    for (; i + kStep <= n; i += kStep) full(i);
    if (i < n) part(i, n - i);
  }

  // ---- sums ----
  // bf16 blocks are summed as (even, odd) element vectors when the ISA can split them with a shift and a mask
  // (no widening shuffle per source); every element still sees the same additions in the same order.
  template <Dtype D>
  static constexpr bool kEvenOdd = D == Dtype::bf16 && kLanes > 1;

  template <Dtype D>
  static Block load_block(const std::byte* p) {
    if constexpr (kEvenOdd<D>) {
      return Bf16Vector<V>::widen_even_odd(p);
    } else {
      return {load<D>(p), load<D>(p + kLanes * dtype_bytes(D))};
    }
  }

  template <Dtype D>
  static Block load_acc(const float* p) {
    if constexpr (kEvenOdd<D>) {
      return Tr::f32_even_odd(p);
    } else {
      return {load_f32(p), load_f32(p + kLanes)};
    }
  }

  template <Dtype D>
  static void store_acc(float* p, Block x) {
    if constexpr (kEvenOdd<D>) {
      Tr::store_interleaved(p, x);
    } else {
      store(p, x.a);
      store(p + kLanes, x.b);
    }
  }

  template <Dtype D, size_t K, bool kInit>
  static Block tall_block(const float* acc_in, const std::byte* const* s, size_t off_bytes) {
    Block acc = load_block<D>(s[0] + off_bytes);
    if constexpr (!kInit) acc = load_acc<D>(acc_in) + acc;
    for (size_t j = 1; j < K; ++j) acc = acc + load_block<D>(s[j] + off_bytes);
    return acc;
  }

  template <Dtype D, size_t K, bool kInit>
  static void tall_fixed(float* dst, const std::byte* const* srcs, size_t n) {
    constexpr size_t eb = dtype_bytes(D);
    constexpr size_t kStep = 2 * kLanes;
    const std::byte* s[K];
    for (size_t j = 0; j < K; ++j) s[j] = srcs[j];
    // Captures by value: nothing the vector loop reads has its address taken, so with -fno-strict-aliasing the
    // source pointers still stay in registers across the stores to dst.
    auto full = [=](size_t i) { store_acc<D>(dst + i, tall_block<D, K, kInit>(dst + i, s, i * eb)); };
    auto part = [=](size_t i, size_t count) {
      alignas(64) std::byte in[K][kStep * eb] = {};
      alignas(64) float acc[kStep] = {};
      const std::byte* p[K];
      for (size_t j = 0; j < K; ++j) {
        std::memcpy(in[j], srcs[j] + i * eb, count * eb);
        p[j] = in[j];
      }
      if constexpr (!kInit) std::memcpy(acc, dst + i, count * sizeof(float));
      store_acc<D>(acc, tall_block<D, K, kInit>(acc, p, 0));
      std::memcpy(dst + i, acc, count * sizeof(float));
    };
    sweep<kStep>(dst, n, full, part);
  }

  template <Dtype D, bool kInit, size_t... Ks>
  static void tall_group(float* dst, const std::byte* const* s, size_t k, size_t n, std::index_sequence<Ks...>) {
    (void)((k == Ks + 1 && (tall_fixed<D, Ks + 1, kInit>(dst, s, n), true)) || ...);
  }

  template <Dtype D>
  static void tall_group(float* dst, const std::byte* const* s, size_t k, size_t n, bool init) {
    constexpr auto ks = std::make_index_sequence<kMaxGroup>{};
    init ? tall_group<D, true>(dst, s, k, n, ks) : tall_group<D, false>(dst, s, k, n, ks);
  }

  template <Dtype D>
  static void tall_dtype(float* dst, const std::byte* const* srcs, size_t k, size_t n, bool init) {
    if (k <= kMaxGroup) {
      tall_group<D>(dst, srcs, k, n, init);
      return;
    }
    constexpr size_t eb = dtype_bytes(D);
    for (size_t b = 0; b < n; b += kBlockElems) {
      const size_t len = min_elems(kBlockElems, n - b);
      for (size_t j = 0; j < k; j += kMaxGroup) {
        const size_t g = min_elems(kMaxGroup, k - j);
        const std::byte* p[kMaxGroup] = {};
        for (size_t q = 0; q < g; ++q) p[q] = srcs[j + q] + b * eb;
        tall_group<D>(dst + b, p, g, len, init && j == 0);
      }
    }
  }

  static void tall(float* dst, const std::byte* const* srcs, size_t k, Dtype d, size_t n, bool init) {
    if (k == 0) {
      if (init && n != 0) std::memset(dst, 0, n * sizeof(float));
      return;
    }
    switch (d) {
      case Dtype::fp32: return tall_dtype<Dtype::fp32>(dst, srcs, k, n, init);
      case Dtype::fp16: return tall_dtype<Dtype::fp16>(dst, srcs, k, n, init);
      case Dtype::bf16: return tall_dtype<Dtype::bf16>(dst, srcs, k, n, init);
    }
  }

  static void init(float* dst, const std::byte* src, Dtype d, size_t n) { tall(dst, &src, 1, d, n, true); }
  static void accumulate(float* dst, const std::byte* src, Dtype d, size_t n) { tall(dst, &src, 1, d, n, false); }

  // ---- elementwise on fp32 ----
  // One partial vector of `count` floats at p, staged through a zero-filled buffer.
  template <class Op>
  static void staged(float* p, size_t count, Op&& op) {
    alignas(64) float buf[kLanes] = {};
    std::memcpy(buf, p, count * sizeof(float));
    store(buf, op(load_f32(buf)));
    std::memcpy(p, buf, count * sizeof(float));
  }

  static void scale(float* dst, float s, size_t n) {
    auto op = [s](V x) { return x * s; };
    sweep<kLanes>(dst, n, [=](size_t i) { store(dst + i, op(load_f32(dst + i))); },
          [=](size_t i, size_t count) { staged(dst + i, count, op); });
  }

  template <Dtype D>
  static void narrow_dtype(std::byte* dst, const float* src, size_t n) {
    constexpr size_t eb = dtype_bytes(D);
    auto full = [=](size_t i) { store_narrow<D>(dst + i * eb, load_f32(src + i)); };
    auto part = [=](size_t i, size_t count) {
      alignas(64) float in[kLanes] = {};
      alignas(64) std::byte out[kLanes * eb];
      std::memcpy(in, src + i, count * sizeof(float));
      store_narrow<D>(out, load_f32(in));
      std::memcpy(dst + i * eb, out, count * eb);
    };
    sweep<kLanes>(src, n, full, part);
  }

  static void narrow(std::byte* dst, const float* src, Dtype d, size_t n) {
    switch (d) {
      case Dtype::fp32:
        if (n != 0) std::memcpy(dst, src, n * sizeof(float));
        return;
      case Dtype::fp16: return narrow_dtype<Dtype::fp16>(dst, src, n);
      case Dtype::bf16: return narrow_dtype<Dtype::bf16>(dst, src, n);
    }
  }
};

}  // namespace phub::agg::detail

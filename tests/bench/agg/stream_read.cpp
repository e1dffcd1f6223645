// Streaming read over vectors of STREAM_VEC_BYTES; meson builds this file once per ISA as STREAM_READ_FN.
#include "stream_read.hpp"

#include <cstring>
#include <utility>

namespace phub::agg::bench {
namespace {

constexpr size_t kVecBytes = STREAM_VEC_BYTES;
using Vec = uint64_t __attribute__((vector_size(kVecBytes)));

Vec load(const std::byte* p) {
  Vec v;
  std::memcpy(&v, __builtin_assume_aligned(p, 64), sizeof v);
  return v;
}

// Four independent XOR chains, so the loads, not the XORs, set the pace.
struct Chains {
  Vec a{}, b{}, c{}, d{};
  [[nodiscard]] uint64_t fold() const {
    const Vec all = a ^ b ^ c ^ d;
    uint64_t folded = 0;
    for (size_t i = 0; i < kVecBytes / sizeof(uint64_t); ++i) folded ^= all[i];
    return folded;
  }
};

// Buffer after buffer, four vectors per step.
uint64_t sequential(const std::byte* const* bufs, size_t k, size_t bytes) {
  Chains x;
  for (size_t j = 0; j < k; ++j) {
    for (size_t i = 0; i < bytes; i += 4 * kVecBytes) {
      x.a ^= load(bufs[j] + i);
      x.b ^= load(bufs[j] + i + kVecBytes);
      x.c ^= load(bufs[j] + i + 2 * kVecBytes);
      x.d ^= load(bufs[j] + i + 3 * kVecBytes);
    }
  }
  return x.fold();
}

// The tall kernel's pattern without its arithmetic: two vectors of each of K buffers per step, pointers in
// registers.
template <size_t K>
uint64_t lockstep(const std::byte* const* bufs, size_t bytes) {
  const std::byte* p[K];
  for (size_t j = 0; j < K; ++j) p[j] = bufs[j];
  Chains x;
  for (size_t i = 0; i < bytes; i += 2 * kVecBytes) {
    for (size_t j = 0; j < K; ++j) {
      (j % 2 == 0 ? x.a : x.c) ^= load(p[j] + i);
      (j % 2 == 0 ? x.b : x.d) ^= load(p[j] + i + kVecBytes);
    }
  }
  return x.fold();
}

template <size_t... Ks>
uint64_t lockstep_any(const std::byte* const* bufs, size_t k, size_t bytes, std::index_sequence<Ks...>) {
  uint64_t folded = 0;
  const bool done = ((k == Ks + 1 && (folded = lockstep<Ks + 1>(bufs, bytes), true)) || ...);
  return done ? folded : sequential(bufs, k, bytes);
}

}  // namespace

uint64_t STREAM_READ_FN(const std::byte* const* bufs, size_t k, size_t bytes, bool in_sequence) {
  return in_sequence ? sequential(bufs, k, bytes) : lockstep_any(bufs, k, bytes, std::make_index_sequence<8>{});
}

}  // namespace phub::agg::bench

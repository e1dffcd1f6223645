// The demo's gradients and the results the server must return for them, computed independently of the
// server: small integers (exact in fp32 and bf16 sums), the server's mean rule, and in ps mode the
// optimizer replayed with lib/agg's scalar kernels (bit-identical to the SIMD ones the server runs).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/dtype.hpp"

namespace phub::demo {

// Element i of key k in round r uses entry b(i) = (7 i + 13 r + 5 k) mod 17 of a 17-entry table, so every
// element is checked while only 17 values per (round, key) are computed. Rank q pushes the integer
// ((b + 3 q) mod 17) - 8, in [-8, 8].
inline constexpr uint32_t kPeriod = 17;

[[nodiscard]] inline uint32_t pattern_start(uint32_t round, uint32_t key) noexcept {
  return (13 * (round % kPeriod) + 5 * (key % kPeriod)) % kPeriod;
}
[[nodiscard]] inline float grad_entry(uint32_t rank, uint32_t b) noexcept {
  return static_cast<float>(static_cast<int>((b + 3 * (rank % kPeriod)) % kPeriod) - 8);
}
// The fp32 sum over ranks 0..workers-1 of entry b (exact: small integers).
[[nodiscard]] float sum_entry(uint32_t workers, uint32_t b) noexcept;

// Calls f(i, b) for i in [0, n) with b the table entry of element i.
template <class F>
void for_each_entry(uint64_t n, uint32_t start, F&& f) {
  uint32_t b = start;
  for (uint64_t i = 0; i < n; ++i) {
    f(i, b);
    b += 7;
    if (b >= kPeriod) b -= kPeriod;
  }
}

// Narrow fp32 values into `out` (elements of dtype d), and widen them back.
void narrow(Dtype d, std::span<const float> in, std::byte* out);
void widen(Dtype d, const std::byte* in, std::span<float> out);

// 17 values narrowed to dtype d, as bytes (2 or 4 per value).
struct Table {
  std::array<std::byte, kPeriod * 4> bytes{};
  size_t elem_bytes = 4;
  [[nodiscard]] const std::byte* at(uint32_t b) const noexcept { return bytes.data() + b * elem_bytes; }
};
[[nodiscard]] Table make_table(Dtype d, std::span<const float, kPeriod> values);

// Writes the gradients of (rank, round, key) into buf (elems of dtype d).
void fill_grads(Dtype d, uint32_t rank, uint32_t round, uint32_t key, std::byte* buf, uint64_t elems);

// Elements of buf that differ bitwise from the allreduce result of (round, key): the sum, or with `mean`
// fp32(sum) * fp32(1 / workers) as the server computes it, narrowed to d. Element `skip` is not checked.
[[nodiscard]] uint64_t count_allreduce_mismatches(Dtype d, uint32_t workers, bool mean, uint32_t round, uint32_t key,
                                                  const std::byte* buf, uint64_t elems, uint64_t skip);

// Initial ps weight element i of key k (multiples of 1/8, exact in every dtype).
[[nodiscard]] inline float init_value(uint32_t key, uint64_t i) noexcept {
  return static_cast<float>(static_cast<int>((i + key) % 13) - 6) * 0.125f;
}

// One key of a ps job as the server holds it: fp32 weights and optimizer state, advanced round by round.
class PsModel {
 public:
  PsModel(const agg::OptimizerParams& opt, uint32_t key, uint64_t elems, float grad_scale);
  void init_bytes(Dtype d, std::byte* out) const;  // the initial weights in dtype d
  void step(uint32_t workers, uint32_t round);     // applies round `round`'s update
  // Elements of buf (dtype d) that differ bitwise from the model's weights.
  [[nodiscard]] uint64_t mismatches(Dtype d, const std::byte* buf) const;

 private:
  agg::OptimizerParams opt_;
  uint32_t key_;
  float grad_scale_;
  std::vector<float> w_, m_, v_, g_;
  mutable std::vector<std::byte> scratch_;
  uint64_t steps_ = 0;
};

}  // namespace phub::demo

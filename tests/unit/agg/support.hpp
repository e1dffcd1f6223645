// Test helpers: ISA parameterisation, buffers at chosen misalignments, random inputs per dtype.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"

namespace phub::agg {
// For gtest's messages: the ISA's name instead of its bytes.
inline void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }
}  // namespace phub::agg

namespace phub::agg::test {

inline constexpr Dtype kDtypes[] = {Dtype::fp32, Dtype::fp16, Dtype::bf16};

// Lengths: every tail 0..64 plus a few large ones (a 32 KB fp32 chunk, odd sizes, beyond a 2048-element block).
std::vector<size_t> test_lengths();

// Bytes at `offset` past a 64-byte boundary, zero-filled, with guard bytes after `bytes` that must stay intact.
class Buffer {
 public:
  Buffer(size_t bytes, size_t offset);
  [[nodiscard]] std::byte* data() { return data_; }
  [[nodiscard]] float* floats() { return reinterpret_cast<float*>(data_); }
  [[nodiscard]] bool guard_intact() const;

 private:
  static constexpr size_t kGuardBytes = 64;
  std::vector<std::byte> storage_;
  std::byte* data_;
  size_t bytes_;
};

// Random finite elements of `d` with mixed magnitudes (sums round, so order matters); `specials` adds inf,
// NaN, signed zeros and subnormals.
void fill_random(std::byte* p, Dtype d, size_t n, std::mt19937& rng, bool specials);

struct OptimizerConfig {
  std::string name;
  OptimizerParams p;  // step and grad_scale are set per step by the tests
};

// SGD, momentum, Nesterov, Adam with and without weight decay, AdamW, and an Adam where eps matters.
std::vector<OptimizerConfig> optimizer_configs();

// Kernels under test, or skip (with a message) when the CPU lacks the ISA.
class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override;
  const Kernels* k_ = nullptr;
};

std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info);

}  // namespace phub::agg::test

#define PHUB_AGG_INSTANTIATE(Suite)                                                    \
  INSTANTIATE_TEST_SUITE_P(AllIsas, Suite, ::testing::ValuesIn(::phub::agg::kAllIsas), \
                           ::phub::agg::test::isa_param_name)

// Independent scalar reference for the agg kernels: written from the definitions, not from lib/agg's code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "phub/agg/kernels.hpp"

namespace phub::agg::ref {

[[nodiscard]] uint32_t bits_of(float f);
[[nodiscard]] float float_of(uint32_t bits);

// Exact value of one little-endian element of `d`.
[[nodiscard]] float widen(Dtype d, const std::byte* p);

// Nearest value representable in `d` (ties to even, overflow to inf), as its bit pattern; NaN gives a NaN pattern.
[[nodiscard]] uint16_t narrow16(Dtype d, float x);

[[nodiscard]] bool is_nan16(Dtype d, uint16_t h);

// Same bits, or both NaN.
[[nodiscard]] bool same(float a, float b);

// dst[i] = (init ? s0 : dst + s0) + s1 + ... in float, index order.
void tall(float* dst, const std::vector<const std::byte*>& srcs, Dtype d, size_t n, bool init);

struct OptState {
  std::vector<float> w, m, v;
};

// One step, as torch/optim/{sgd,adam,adamw}.py (1.13) writes it, in float with one rounding per operation.
void torch_order_step(const OptimizerParams& p, OptState& s, const std::vector<float>& g);

struct OptStateD {
  std::vector<double> w, m, v;
};

// One step of the algorithm boxes in the PyTorch docs (SGD, Adam, AdamW), in double.
void docs_step(const OptimizerParams& p, OptStateD& s, const std::vector<float>& g);

}  // namespace phub::agg::ref

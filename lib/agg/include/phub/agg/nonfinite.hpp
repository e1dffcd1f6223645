// Finding NaN and Inf in elements as they arrive (little-endian fp32, fp16, bf16) or in fp32 sums: the guard
// that keeps a non-finite value out of a ps job's weights (docs/server.md, "Non-finite values").
#pragma once

#include <cstddef>
#include <cstdint>

#include "phub/base/dtype.hpp"

namespace phub::agg {

// Whether any of the n elements at p (dtype d, little-endian, any alignment) is NaN or +-Inf: an exponent of all
// ones. One pass, branch-free (the compiler vectorises it); the answer for the common case, nothing found.
[[nodiscard]] bool any_nonfinite(const std::byte* p, Dtype d, size_t n) noexcept;
// The index of the first such element, n if none.
[[nodiscard]] size_t first_nonfinite(const std::byte* p, Dtype d, size_t n) noexcept;
// The same over host fp32 values (a sum).
[[nodiscard]] inline bool any_nonfinite(const float* p, size_t n) noexcept {
  return any_nonfinite(reinterpret_cast<const std::byte*>(p), Dtype::fp32, n);
}

}  // namespace phub::agg

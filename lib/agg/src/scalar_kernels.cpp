// Portable scalar kernels: one element per "vector", baseline ISA flags.
#include <cmath>

#include "kernel_table.hpp"
#include "phub/base/bytes.hpp"
#include "scalar_convert.hpp"
#include "tables.hpp"

namespace phub::agg::detail {
namespace {

struct Scalar {
  using V = float;
  static constexpr size_t kLanes = 1;

  static V from_fp32(const std::byte* p) noexcept { return bits_to_float(load_le<uint32_t>(p)); }
  static V from_fp16(const std::byte* p) noexcept { return half_to_float(load_le<uint16_t>(p)); }
  static V from_bf16(const std::byte* p) noexcept { return bf16_to_float(load_le<uint16_t>(p)); }
  static void to_fp16(std::byte* p, V x) noexcept { store_le<uint16_t>(p, float_to_half(x)); }
  static void to_bf16(std::byte* p, V x) noexcept { store_le<uint16_t>(p, float_to_bf16(x)); }
  static V sqrt(V x) noexcept { return std::sqrt(x); }
};

}  // namespace

const Kernels& scalar_kernels() noexcept {
  static constexpr Kernels kTable = make_kernels<Scalar>(Isa::scalar, "scalar");
  return kTable;
}

}  // namespace phub::agg::detail

// Element types carried on the wire and accepted by the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace phub {

// Wire values are fixed: they appear in packets (see docs/protocol.md).
enum class Dtype : uint8_t {
  fp32 = 0,
  fp16 = 1,  // IEEE 754 binary16
  bf16 = 2,  // bfloat16: the top half of an fp32
};

inline constexpr uint8_t kDtypeCount = 3;

[[nodiscard]] constexpr bool dtype_valid(uint8_t wire) noexcept { return wire < kDtypeCount; }

[[nodiscard]] constexpr size_t dtype_bytes(Dtype d) noexcept { return d == Dtype::fp32 ? 4 : 2; }

[[nodiscard]] constexpr std::string_view dtype_name(Dtype d) noexcept {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
  }
  return "?";
}

[[nodiscard]] constexpr std::optional<Dtype> parse_dtype(std::string_view s) noexcept {
  if (s == "fp32") return Dtype::fp32;
  if (s == "fp16") return Dtype::fp16;
  if (s == "bf16") return Dtype::bf16;
  return std::nullopt;
}

}  // namespace phub

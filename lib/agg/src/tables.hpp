// The per-ISA kernel tables, each defined in its own translation unit with its own compiler flags.
#pragma once

#include "phub/agg/kernels.hpp"

namespace phub::agg::detail {

[[nodiscard]] const Kernels& scalar_kernels() noexcept;
#if PHUB_AGG_X86
[[nodiscard]] const Kernels& avx2_kernels() noexcept;
[[nodiscard]] const Kernels& avx512_kernels() noexcept;
#endif

}  // namespace phub::agg::detail

// CPUID/XGETBV feature detection for the kernels' ISAs.
#pragma once

#include <string>

namespace phub::agg::detail {

struct CpuFeatures {
  bool avx = false, avx2 = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool os_ymm = false;  // XCR0 enables SSE and AVX state
  bool os_zmm = false;  // XCR0 also enables opmask, ZMM_Hi256 and Hi16_ZMM state
};

[[nodiscard]] CpuFeatures detect_cpu() noexcept;

// "avx2 f16c avx512f ... os:ymm,zmm": what was found, for the selection log line.
[[nodiscard]] std::string describe(const CpuFeatures& f);

}  // namespace phub::agg::detail

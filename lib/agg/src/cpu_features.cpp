// CPUID/XGETBV feature detection (x86-64); other CPUs report no vector ISA.
#include "cpu_features.hpp"

#include <cstdint>

#if PHUB_AGG_X86
#include <cpuid.h>
#endif

namespace phub::agg::detail {
namespace {

constexpr bool bit(uint32_t reg, unsigned n) noexcept { return ((reg >> n) & 1U) != 0; }

#if PHUB_AGG_X86
uint64_t read_xcr0() noexcept {
  uint32_t lo = 0;
  uint32_t hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#endif

}  // namespace

CpuFeatures detect_cpu() noexcept {
  CpuFeatures f;
#if PHUB_AGG_X86
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return f;
  const bool osxsave = bit(ecx, 27);
  f.avx = bit(ecx, 28);
  f.f16c = bit(ecx, 29);
  if (osxsave) {
    const uint64_t xcr0 = read_xcr0();
    f.os_ymm = (xcr0 & 0x6U) == 0x6U;     // XMM | YMM
    f.os_zmm = (xcr0 & 0xe6U) == 0xe6U;   // XMM | YMM | opmask | ZMM_Hi256 | Hi16_ZMM
  }
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) {
    f.avx2 = bit(ebx, 5);
    f.avx512f = bit(ebx, 16);
    f.avx512dq = bit(ebx, 17);
    f.avx512bw = bit(ebx, 30);
    f.avx512vl = bit(ebx, 31);
  }
#endif
  return f;
}

std::string describe(const CpuFeatures& f) {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx, "avx");
  add(f.avx2, "avx2");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  s += f.os_zmm ? "; os saves ymm,zmm" : f.os_ymm ? "; os saves ymm" : "; os saves no ymm";
  return s;
}

}  // namespace phub::agg::detail

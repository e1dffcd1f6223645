// Runtime kernel selection: CPU support checks, the PHUB_ISA override and the log line.
#include <cstdio>
#include <cstdlib>

#include "cpu_features.hpp"
#include "phub/agg/kernels.hpp"
#include "tables.hpp"

namespace phub::agg {
namespace {

const detail::CpuFeatures& cpu() noexcept {
  static const detail::CpuFeatures features = detail::detect_cpu();
  return features;
}

const Selection& selection() {
  static const Selection chosen = [] {
    Selection s = choose_isa(std::getenv("PHUB_ISA"));  // NOLINT(concurrency-mt-unsafe): read once
    if (s.override_failed) std::fprintf(stderr, "phub agg: %s\n", s.reason.c_str());
    return s;
  }();
  return chosen;
}

}  // namespace

bool isa_supported(Isa isa) noexcept {
  const detail::CpuFeatures& f = cpu();
  const bool avx2 = f.avx && f.avx2 && f.f16c && f.os_ymm;
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return PHUB_AGG_X86 && avx2;
    case Isa::avx512:
      return PHUB_AGG_X86 && avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_zmm;
  }
  return false;
}

const Kernels& kernels_for(Isa isa) noexcept {
  if (!isa_supported(isa)) {
    std::fprintf(stderr, "phub agg: kernels_for(%s) on a CPU without %s\n", isa_name(isa).data(),
                 isa_name(isa).data());
    std::abort();
  }
#if PHUB_AGG_X86
  if (isa == Isa::avx512) return detail::avx512_kernels();
  if (isa == Isa::avx2) return detail::avx2_kernels();
#endif
  return detail::scalar_kernels();
}

Isa best_isa() noexcept {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Selection choose_isa(const char* env_value) {
  const Isa best = best_isa();
  const std::string cpu_line = " (cpu: " + detail::describe(cpu()) + ")";
  auto pick = [&cpu_line](Isa isa, const std::string& why, bool failed = false) {
    return Selection{isa, "agg kernels: " + std::string(isa_name(isa)) + ", " + why + cpu_line, failed};
  };
  if (env_value == nullptr || *env_value == '\0') return pick(best, "the best this CPU supports");
  const std::string wanted(env_value);
  for (const Isa isa : kAllIsas) {
    if (wanted != isa_name(isa)) continue;
    if (isa_supported(isa)) return pick(isa, "set by PHUB_ISA");
    return pick(best, "error: PHUB_ISA=" + wanted + " is not supported by this CPU; using the best supported", true);
  }
  return pick(best, "error: PHUB_ISA=" + wanted + " is not scalar|avx2|avx512; using the best supported", true);
}

const Kernels& select_kernels() { return kernels_for(selection().isa); }

std::string describe_selection() { return selection().reason; }

}  // namespace phub::agg

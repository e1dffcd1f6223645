// Aggregation and optimizer kernels (scalar, AVX2, AVX-512) behind one table of function pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "phub/base/dtype.hpp"

namespace phub::agg {

enum class Isa : uint8_t { scalar, avx2, avx512 };

inline constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512};

[[nodiscard]] constexpr std::string_view isa_name(Isa isa) noexcept {
  constexpr std::string_view kNames[] = {"scalar", "avx2", "avx512"};
  const auto i = static_cast<size_t>(isa);
  return i < std::size(kNames) ? kNames[i] : "?";
}

// Independent of lib/config: the engine maps the config's optimizer onto this.
enum class OptimizerKind : uint8_t { sgd, momentum, nesterov, adam };

[[nodiscard]] constexpr std::string_view optimizer_kind_name(OptimizerKind k) noexcept {
  constexpr std::string_view kNames[] = {"sgd", "momentum", "nesterov", "adam"};
  const auto i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "?";
}

// torch.optim semantics of PyTorch 1.13 (SGD with dampening 0, Adam, AdamW; no amsgrad, no maximize).
// The values are doubles, as Python floats are: derived constants (1 - beta1, bias corrections, lr / bias
// correction, 1 - lr*wd) are computed in double from them and rounded to float once, as torch does; the
// values an operation takes directly (momentum, beta1, eps, ...) are rounded to float, as torch's kernels do.
struct OptimizerParams {
  OptimizerKind kind = OptimizerKind::sgd;
  double lr = 0.01;
  double momentum = 0.0;      // momentum / nesterov
  double beta1 = 0.9;         // adam
  double beta2 = 0.999;       // adam
  double eps = 1e-8;          // adam
  double weight_decay = 0.0;  // L2 added to the gradient; with adamw, decoupled: w *= 1 - lr*wd
  bool adamw = false;
  uint64_t step = 1;          // 1-based; momentum buffers start from g at step 1; Adam bias correction
  float grad_scale = 1.0F;    // g is multiplied by this first (1/W turns a sum into a mean)
};

struct Kernels {
  Isa isa;
  const char* name;  // "scalar" | "avx2" | "avx512"
  // dst[i] = widen(src[i]); src is little-endian `d` at any alignment; dst is 4-aligned; n may be 0.
  void (*init)(float* dst, const std::byte* src, Dtype d, size_t n);
  // dst[i] += widen(src[i]).
  void (*accumulate)(float* dst, const std::byte* src, Dtype d, size_t n);
  // Tall sum of k contributions in one pass, added in index order:
  //   init:  dst[i] = widen(srcs[0][i]) + widen(srcs[1][i]) + ...   (same bits as init() then accumulate()s;
  //          k == 0 gives zeros)
  //   !init: dst[i] = dst[i] + widen(srcs[0][i]) + widen(srcs[1][i]) + ...
  void (*tall)(float* dst, const std::byte* const* srcs, size_t k, Dtype d, size_t n, bool init);
  // dst[i] *= s.
  void (*scale)(float* dst, float s, size_t n);
  // dst = narrow(src) to d, little-endian, any alignment: round to nearest even, overflow to inf, subnormals
  // kept, NaN stays NaN (quietened). fp32 is a copy.
  void (*narrow)(std::byte* dst, const float* src, Dtype d, size_t n);
  // Fused optimizer step over one chunk, one pass over memory. w: weights (in/out); m: momentum buffer or
  // Adam exp_avg (unused, may be null, for plain sgd); v: Adam exp_avg_sq (null unless adam); g: gradient.
  void (*optimize)(const OptimizerParams& p, float* w, float* m, float* v, const float* g, size_t n);
};

// Determinism: for the same inputs and order, every ISA gives bit-identical sums, scales, conversions and
// optimizer updates (IEEE add/mul/div/sqrt in the same order per element, no FMA). NaN results are NaN in
// every ISA; their payload may differ.

// Whether the CPU and OS support the kernels of `isa` (CPUID features and XGETBV-enabled register state).
[[nodiscard]] bool isa_supported(Isa isa) noexcept;

// Precondition: isa_supported(isa). An unsupported ISA is a programming error: it aborts with a message.
[[nodiscard]] const Kernels& kernels_for(Isa isa) noexcept;

// Widest supported ISA.
[[nodiscard]] Isa best_isa() noexcept;

struct Selection {
  Isa isa;
  std::string reason;         // one log line
  bool override_failed = false;  // PHUB_ISA named an unknown or unsupported ISA
};

// The choice select_kernels() makes, as a pure function of PHUB_ISA's value (null: unset).
[[nodiscard]] Selection choose_isa(const char* env_value);

// Best supported kernels, chosen once per process; PHUB_ISA=scalar|avx2|avx512 overrides. An unknown or
// unsupported value prints an error on stderr and falls back to the best.
[[nodiscard]] const Kernels& select_kernels();

// One log line: the chosen ISA and why.
[[nodiscard]] std::string describe_selection();

}  // namespace phub::agg

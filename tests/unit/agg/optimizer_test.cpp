// Fused optimizer of every ISA: bit-exact against torch's operation order, close to the docs' formulas in double.
#include <cmath>

#include "reference.hpp"
#include "support.hpp"

namespace phub::agg::test {
namespace {

using OptimizerTest = IsaTest;

// |a - b| <= tol * (|b| + scale): relative, with the array's RMS as a floor so values near zero compare sanely.
// tol = 4e-6 is ~30 float ulps; float keeps 2^-24 per rounding and a step rounds ~10 times.
double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double rms = 0;
  for (const double x : want) rms += x * x;
  rms = std::sqrt(rms / static_cast<double>(want.empty() ? 1 : want.size()));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(double{got[i]} - want[i]) / (std::fabs(want[i]) + rms));
  }
  return worst;
}

constexpr double kDocsTolerance = 4e-6;
constexpr size_t kSteps = 6;

void run_config(const Kernels& kern, const OptimizerConfig& cfg, size_t n, size_t w_off, std::mt19937& rng) {
  Buffer w(n * 4, 4 * w_off);
  Buffer m(n * 4, 4 * ((w_off + 1) % 3));
  Buffer v(n * 4, 4 * ((w_off + 2) % 3));
  std::normal_distribution<float> normal(0.0F, 1.0F);
  ref::OptState want{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  for (size_t i = 0; i < n; ++i) w.floats()[i] = want.w[i] = normal(rng);
  ref::OptStateD docs{{want.w.begin(), want.w.end()}, std::vector<double>(n), std::vector<double>(n)};
  const bool has_m = cfg.p.kind != OptimizerKind::sgd;
  const bool has_v = cfg.p.kind == OptimizerKind::adam;
  for (uint64_t step = 1; step <= kSteps; ++step) {
    OptimizerParams p = cfg.p;
    p.step = step;
    p.grad_scale = 0.5F;
    std::vector<float> g(n);
    for (float& x : g) x = normal(rng) * (step % 2 == 0 ? 1.0F : 0.01F);
    kern.optimize(p, w.floats(), has_m ? m.floats() : nullptr, has_v ? v.floats() : nullptr, g.data(), n);
    ref::torch_order_step(p, want, g);
    ref::docs_step(p, docs, g);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(ref::bits_of(w.floats()[i]), ref::bits_of(want.w[i])) << cfg.name << " w n=" << n << " i=" << i;
      if (has_m) {
        ASSERT_EQ(ref::bits_of(m.floats()[i]), ref::bits_of(want.m[i])) << cfg.name << " m i=" << i;
      }
      if (has_v) {
        ASSERT_EQ(ref::bits_of(v.floats()[i]), ref::bits_of(want.v[i])) << cfg.name << " v i=" << i;
      }
    }
    const std::vector<float> got_w(w.floats(), w.floats() + n);
    ASSERT_LE(worst_error(got_w, docs.w), kDocsTolerance) << cfg.name << " w vs docs, step " << step << " n=" << n;
    if (has_m) {
      const std::vector<float> got_m(m.floats(), m.floats() + n);
      ASSERT_LE(worst_error(got_m, docs.m), kDocsTolerance) << cfg.name << " m vs docs, step " << step;
    }
    if (has_v) {
      const std::vector<float> got_v(v.floats(), v.floats() + n);
      ASSERT_LE(worst_error(got_v, docs.v), kDocsTolerance) << cfg.name << " v vs docs, step " << step;
    }
  }
  ASSERT_TRUE(w.guard_intact() && m.guard_intact() && v.guard_intact()) << cfg.name << " n=" << n;
}

TEST_P(OptimizerTest, MatchesTorchOrderAndDocsFormulas) {
  std::mt19937 rng(6);
  for (const OptimizerConfig& cfg : optimizer_configs()) {
    for (const size_t n : test_lengths()) {
      run_config(*k_, cfg, n, n % 3, rng);
      if (HasFatalFailure()) return;
    }
  }
}

// The first momentum step copies the gradient (torch clones d_p), whatever the buffer held.
TEST_P(OptimizerTest, FirstMomentumStepIgnoresOldBuffer) {
  constexpr size_t kN = 19;
  std::vector<float> w(kN, 1.0F), m(kN, 1e30F), g(kN, 2.0F);
  const OptimizerParams p{.kind = OptimizerKind::momentum, .lr = 0.5F, .momentum = 0.9F, .step = 1};
  k_->optimize(p, w.data(), m.data(), nullptr, g.data(), kN);
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(m[i], 2.0F);
    ASSERT_EQ(w[i], 0.0F);
  }
}

PHUB_AGG_INSTANTIATE(OptimizerTest);

}  // namespace
}  // namespace phub::agg::test

// Derives the optimizer's per-call constants (compiled without ISA flags; called once per chunk).
#include "coeffs.hpp"

#include <cmath>

namespace phub::agg::detail {

Coeffs derive_coeffs(const OptimizerParams& p) noexcept {
  const double lr = p.lr;
  const double beta1 = p.beta1;
  const double beta2 = p.beta2;
  const auto step = static_cast<double>(p.step == 0 ? 1 : p.step);
  const double bias_corr1 = 1.0 - std::pow(beta1, step);
  const double bias_corr2 = 1.0 - std::pow(beta2, step);
  return Coeffs{
      .grad_scale = p.grad_scale,
      .weight_decay = static_cast<float>(p.weight_decay),
      .neg_lr = static_cast<float>(-lr),
      .momentum = static_cast<float>(p.momentum),
      .decay_mult = static_cast<float>(1.0 - lr * p.weight_decay),
      .beta1 = static_cast<float>(beta1),
      .one_minus_beta1 = static_cast<float>(1.0 - beta1),
      .beta2 = static_cast<float>(beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - beta2),
      .bias_corr2_sqrt = static_cast<float>(std::sqrt(bias_corr2)),
      .neg_step_size = static_cast<float>(-(lr / bias_corr1)),
      .eps = static_cast<float>(p.eps),
  };
}

}  // namespace phub::agg::detail

// Per-call optimizer constants, derived once from OptimizerParams in double and rounded to float as torch does.
#pragma once

#include "phub/agg/kernels.hpp"

namespace phub::agg::detail {

struct Coeffs {
  float grad_scale;
  float weight_decay;
  float neg_lr;             // sgd family: w + neg_lr * d_p
  float momentum;
  float decay_mult;         // adamw: 1 - lr * wd
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias_corr2_sqrt;    // sqrt(1 - beta2^t)
  float neg_step_size;      // -lr / (1 - beta1^t)
  float eps;
};

[[nodiscard]] Coeffs derive_coeffs(const OptimizerParams& p) noexcept;

}  // namespace phub::agg::detail

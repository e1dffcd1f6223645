// The fused optimizer step (SGD, momentum, Nesterov, Adam, AdamW) written once over a per-ISA traits type.
#pragma once

#include <cstdint>
#include <cstring>

#include "coeffs.hpp"
#include "kernel_body.hpp"

namespace phub::agg::detail {

template <class Tr>
struct OptimizerBody {
  using B = Body<Tr>;
  using V = typename Tr::V;
  static constexpr size_t kLanes = Tr::kLanes;

  enum class Decay : uint8_t { none, l2, decoupled };

  // torch.optim's operation order, one rounding per operation (see torch/optim/{sgd,adam,adamw}.py, 1.13).
  template <OptimizerKind K, Decay kDecay, bool kFirst>
  static void update(const Coeffs& c, V& w, V& m, V& v, V g) {
    g = g * c.grad_scale;
    if constexpr (kDecay == Decay::l2) g = g + w * c.weight_decay;        // grad.add(param, alpha=wd)
    if constexpr (kDecay == Decay::decoupled) w = w * c.decay_mult;       // param.mul_(1 - lr*wd)
    if constexpr (K == OptimizerKind::adam) {
      m = m * c.beta1 + g * c.one_minus_beta1;                            // exp_avg.mul_(b1).add_(g, 1-b1)
      v = v * c.beta2 + (g * c.one_minus_beta2) * g;                      // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
      const V denom = Tr::sqrt(v) / c.bias_corr2_sqrt + c.eps;            // (sqrt(v) / bc2_sqrt).add_(eps)
      w = w + (m * c.neg_step_size) / denom;                              // param.addcdiv_(m, denom, -step_size)
    } else {
      if constexpr (K != OptimizerKind::sgd) {
        if constexpr (kFirst) {
          m = g;                                                          // buf = clone(d_p)
        } else {
          m = m * c.momentum + g;                                         // buf.mul_(mom).add_(d_p)
        }
        if constexpr (K == OptimizerKind::nesterov) {
          g = g + m * c.momentum;                                         // d_p.add(buf, alpha=mom)
        } else {
          g = m;
        }
      }
      w = w + g * c.neg_lr;                                               // param.add_(d_p, alpha=-lr)
    }
  }

  template <OptimizerKind K, Decay kDecay, bool kFirst>
  static void update_at(const Coeffs& c, float* w, float* m, float* v, const float* g) {
    constexpr bool kHasM = K != OptimizerKind::sgd;
    constexpr bool kHasV = K == OptimizerKind::adam;
    V wv = B::load_f32(w);
    V mv{};
    V vv{};
    if constexpr (kHasM && !kFirst) mv = B::load_f32(m);
    if constexpr (kHasV) vv = B::load_f32(v);
    update<K, kDecay, kFirst>(c, wv, mv, vv, B::load_f32(g));
    B::store(w, wv);
    if constexpr (kHasM) B::store(m, mv);
    if constexpr (kHasV) B::store(v, vv);
  }

  template <OptimizerKind K, Decay kDecay, bool kFirst>
  static void optimize_run(const Coeffs c, float* w, float* m, float* v, const float* g, size_t n) {
    constexpr bool kHasM = K != OptimizerKind::sgd;
    constexpr bool kHasV = K == OptimizerKind::adam;
    auto full = [=](size_t i) {
      update_at<K, kDecay, kFirst>(c, w + i, kHasM ? m + i : nullptr, kHasV ? v + i : nullptr, g + i);
    };
    auto part = [=](size_t i, size_t count) {
      alignas(64) float buf[4][kLanes] = {};
      const size_t bytes = count * sizeof(float);
      std::memcpy(buf[0], w + i, bytes);
      if constexpr (kHasM) std::memcpy(buf[1], m + i, bytes);
      if constexpr (kHasV) std::memcpy(buf[2], v + i, bytes);
      std::memcpy(buf[3], g + i, bytes);
      update_at<K, kDecay, kFirst>(c, buf[0], buf[1], buf[2], buf[3]);
      std::memcpy(w + i, buf[0], bytes);
      if constexpr (kHasM) std::memcpy(m + i, buf[1], bytes);
      if constexpr (kHasV) std::memcpy(v + i, buf[2], bytes);
    };
    B::template sweep<kLanes>(w, n, full, part);
  }

  template <OptimizerKind K>
  static void optimize_momentum(const Coeffs& c, bool decay, bool first, float* w, float* m, const float* g,
                                size_t n) {
    if (decay) {
      first ? optimize_run<K, Decay::l2, true>(c, w, m, nullptr, g, n)
            : optimize_run<K, Decay::l2, false>(c, w, m, nullptr, g, n);
    } else {
      first ? optimize_run<K, Decay::none, true>(c, w, m, nullptr, g, n)
            : optimize_run<K, Decay::none, false>(c, w, m, nullptr, g, n);
    }
  }

  static void optimize(const OptimizerParams& p, float* w, float* m, float* v, const float* g, size_t n) {
    if (n == 0) return;
    const Coeffs c = derive_coeffs(p);
    const bool decay = p.weight_decay != 0.0F;
    switch (p.kind) {
      case OptimizerKind::sgd:
        decay ? optimize_run<OptimizerKind::sgd, Decay::l2, false>(c, w, nullptr, nullptr, g, n)
              : optimize_run<OptimizerKind::sgd, Decay::none, false>(c, w, nullptr, nullptr, g, n);
        return;
      case OptimizerKind::momentum:
        return optimize_momentum<OptimizerKind::momentum>(c, decay, p.step <= 1, w, m, g, n);
      case OptimizerKind::nesterov:
        return optimize_momentum<OptimizerKind::nesterov>(c, decay, p.step <= 1, w, m, g, n);
      case OptimizerKind::adam:
        if (!decay) return optimize_run<OptimizerKind::adam, Decay::none, false>(c, w, m, v, g, n);
        p.adamw ? optimize_run<OptimizerKind::adam, Decay::decoupled, false>(c, w, m, v, g, n)
                : optimize_run<OptimizerKind::adam, Decay::l2, false>(c, w, m, v, g, n);
        return;
    }
  }
};

}  // namespace phub::agg::detail

// Independent scalar reference: value-level definitions of widening, rounding, tall sums and the optimizers.
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace phub::agg::ref {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

namespace {

uint16_t read16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) | (std::to_integer<uint16_t>(p[1]) << 8));
}

// IEEE binary16 by its definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for e == 0.
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
  if (e == 0x1f) return m == 0 ? sign * HUGE_VAL : std::nan("");
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// Nearest of lo < x < hi (|x| between two adjacent representable magnitudes): compare 2x with lo + hi, exact in
// double; a tie goes to the even pattern.
uint16_t nearest(double x, double lo, uint16_t lo_bits, double hi, uint16_t hi_bits) {
  const double twice = 2.0 * x;
  if (twice < lo + hi) return lo_bits;
  if (twice > lo + hi) return hi_bits;
  return (lo_bits & 1) == 0 ? lo_bits : hi_bits;
}

uint16_t narrow_fp16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  // Positive finite halves 0x0000..0x7bff are increasing in value; 0x7c00 (inf) sits where 2^16 would.
  uint16_t lo = 0;
  uint16_t hi = 0x7c00;
  while (hi - lo > 1) {
    const auto mid = static_cast<uint16_t>((lo + hi) / 2);
    (half_value(mid) <= a ? lo : hi) = mid;
  }
  if (half_value(lo) == a) return sign | lo;
  const double hi_value = hi == 0x7c00 ? 65536.0 : half_value(hi);
  return sign | nearest(a, half_value(lo), lo, hi_value, hi);
}

uint16_t narrow_bf16(float x) {
  const uint32_t bits = bits_of(x);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const double a = std::fabs(static_cast<double>(x));
  const auto lo = static_cast<uint16_t>((bits >> 16) & 0x7fff);  // truncation: the magnitude just below
  const double lo_value = std::fabs(static_cast<double>(float_of(static_cast<uint32_t>(lo) << 16)));
  if (lo_value == a) return sign | lo;
  const auto hi = static_cast<uint16_t>(lo + 1);
  const double hi_value = hi == 0x7f80 ? std::ldexp(1.0, 128) : static_cast<double>(float_of(uint32_t{hi} << 16));
  return sign | nearest(a, lo_value, lo, hi_value, hi);
}

}  // namespace

float widen(Dtype d, const std::byte* p) {
  switch (d) {
    case Dtype::fp32: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
    case Dtype::fp16: return static_cast<float>(half_value(read16(p)));
    case Dtype::bf16: return float_of(static_cast<uint32_t>(read16(p)) << 16);
  }
  return 0;
}

bool is_nan16(Dtype d, uint16_t h) {
  return d == Dtype::fp16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0 : (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

uint16_t narrow16(Dtype d, float x) {
  if (std::isnan(x)) return d == Dtype::fp16 ? 0x7e00 : 0x7fc0;
  if (std::isinf(x)) {
    return static_cast<uint16_t>((std::signbit(x) ? 0x8000 : 0) | (d == Dtype::fp16 ? 0x7c00 : 0x7f80));
  }
  return d == Dtype::fp16 ? narrow_fp16(x) : narrow_bf16(x);
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b); }

void tall(float* dst, const std::vector<const std::byte*>& srcs, Dtype d, size_t n, bool init) {
  const size_t eb = dtype_bytes(d);
  for (size_t i = 0; i < n; ++i) {
    if (srcs.empty()) {
      if (init) dst[i] = 0.0F;
      continue;
    }
    float acc = init ? widen(d, srcs[0] + i * eb) : dst[i] + widen(d, srcs[0] + i * eb);
    for (size_t j = 1; j < srcs.size(); ++j) acc = acc + widen(d, srcs[j] + i * eb);
    dst[i] = acc;
  }
}

void torch_order_step(const OptimizerParams& p, OptState& s, const std::vector<float>& g_in) {
  // As torch: a value an operation takes directly is rounded to float; what Python derives from the values
  // (1 - beta, bias corrections, lr / bias correction, 1 - lr * wd) is computed in double, then rounded.
  const double t = static_cast<double>(p.step);
  const bool decay = p.weight_decay != 0.0;
  const auto wd = static_cast<float>(p.weight_decay), mu = static_cast<float>(p.momentum);
  const auto beta1 = static_cast<float>(p.beta1), beta2 = static_cast<float>(p.beta2), eps = static_cast<float>(p.eps);
  const auto neg_lr = static_cast<float>(-p.lr);
  for (size_t i = 0; i < g_in.size(); ++i) {
    float g = g_in[i] * p.grad_scale;
    float& w = s.w[i];
    if (p.kind == OptimizerKind::adam) {
      if (decay && p.adamw) w = w * static_cast<float>(1.0 - p.lr * p.weight_decay);
      if (decay && !p.adamw) g = g + wd * w;
      s.m[i] = s.m[i] * beta1 + static_cast<float>(1.0 - p.beta1) * g;
      s.v[i] = s.v[i] * beta2 + static_cast<float>(1.0 - p.beta2) * g * g;
      const auto bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t)));
      const auto step_size = static_cast<float>(p.lr / (1.0 - std::pow(p.beta1, t)));
      const float denom = std::sqrt(s.v[i]) / bc2_sqrt + eps;
      w = w + -step_size * s.m[i] / denom;
      continue;
    }
    if (decay) g = g + wd * w;
    if (p.kind != OptimizerKind::sgd) {
      s.m[i] = p.step <= 1 ? g : s.m[i] * mu + g;
      g = p.kind == OptimizerKind::nesterov ? g + mu * s.m[i] : s.m[i];
    }
    w = w + neg_lr * g;
  }
}

void docs_step(const OptimizerParams& p, OptStateD& s, const std::vector<float>& g_in) {
  const double t = static_cast<double>(p.step);
  const double lr = p.lr, wd = p.weight_decay, mu = p.momentum, b1 = p.beta1, b2 = p.beta2;
  for (size_t i = 0; i < g_in.size(); ++i) {
    double g = double{g_in[i]} * double{p.grad_scale};
    double& w = s.w[i];
    if (p.kind == OptimizerKind::adam) {
      if (p.adamw) {
        w = w - lr * wd * w;
      } else if (wd != 0) {
        g = g + wd * w;
      }
      s.m[i] = b1 * s.m[i] + (1 - b1) * g;
      s.v[i] = b2 * s.v[i] + (1 - b2) * g * g;
      const double m_hat = s.m[i] / (1 - std::pow(b1, t));
      const double v_hat = s.v[i] / (1 - std::pow(b2, t));
      w = w - lr * m_hat / (std::sqrt(v_hat) + double{p.eps});
      continue;
    }
    if (wd != 0) g = g + wd * w;
    if (p.kind != OptimizerKind::sgd) {
      s.m[i] = p.step > 1 ? mu * s.m[i] + g : g;
      g = p.kind == OptimizerKind::nesterov ? g + mu * s.m[i] : s.m[i];
    }
    w = w - lr * g;
  }
}

}  // namespace phub::agg::ref

// Gradient patterns and independently computed expected results of the demo worker.
#include "pattern.hpp"

#include <cstring>

namespace phub::demo {
namespace {

const agg::Kernels& scalar() { return agg::kernels_for(agg::Isa::scalar); }

}  // namespace

void narrow(Dtype d, std::span<const float> in, std::byte* out) { scalar().narrow(out, in.data(), d, in.size()); }

void widen(Dtype d, const std::byte* in, std::span<float> out) { scalar().init(out.data(), in, d, out.size()); }

float sum_entry(uint32_t workers, uint32_t b) noexcept {
  float s = grad_entry(0, b);
  for (uint32_t q = 1; q < workers; ++q) s += grad_entry(q, b);
  return s;
}

Table make_table(Dtype d, std::span<const float, kPeriod> values) {
  Table t;
  t.elem_bytes = dtype_bytes(d);
  scalar().narrow(t.bytes.data(), values.data(), d, kPeriod);
  return t;
}

void fill_grads(Dtype d, uint32_t rank, uint32_t round, uint32_t key, std::byte* buf, uint64_t elems) {
  std::array<float, kPeriod> v{};
  for (uint32_t b = 0; b < kPeriod; ++b) v[b] = grad_entry(rank, b);
  const Table t = make_table(d, v);
  for_each_entry(elems, pattern_start(round, key),
                 [&](uint64_t i, uint32_t b) { std::memcpy(buf + i * t.elem_bytes, t.at(b), t.elem_bytes); });
}

uint64_t count_allreduce_mismatches(Dtype d, uint32_t workers, bool mean, uint32_t round, uint32_t key,
                                    const std::byte* buf, uint64_t elems, uint64_t skip) {
  std::array<float, kPeriod> v{};
  const float scale = 1.0f / static_cast<float>(workers);  // the server's JobMath: fp32(1 / workers)
  for (uint32_t b = 0; b < kPeriod; ++b) v[b] = mean ? sum_entry(workers, b) * scale : sum_entry(workers, b);
  const Table t = make_table(d, v);
  uint64_t bad = 0;
  for_each_entry(elems, pattern_start(round, key), [&](uint64_t i, uint32_t b) {
    if (i != skip && std::memcmp(buf + i * t.elem_bytes, t.at(b), t.elem_bytes) != 0) ++bad;
  });
  return bad;
}

PsModel::PsModel(const agg::OptimizerParams& opt, uint32_t key, uint64_t elems, float grad_scale)
    : opt_(opt), key_(key), grad_scale_(grad_scale), w_(elems), m_(elems, 0.0f), v_(elems, 0.0f), g_(elems) {
  for (uint64_t i = 0; i < elems; ++i) w_[i] = init_value(key, i);
}

void PsModel::init_bytes(Dtype d, std::byte* out) const { scalar().narrow(out, w_.data(), d, w_.size()); }

void PsModel::step(uint32_t workers, uint32_t round) {
  std::array<float, kPeriod> sums{};
  for (uint32_t b = 0; b < kPeriod; ++b) sums[b] = sum_entry(workers, b);
  for_each_entry(g_.size(), pattern_start(round, key_), [&](uint64_t i, uint32_t b) { g_[i] = sums[b]; });
  agg::OptimizerParams p = opt_;
  p.step = ++steps_;
  p.grad_scale = grad_scale_;
  const bool has_m = p.kind != agg::OptimizerKind::sgd;
  const bool has_v = p.kind == agg::OptimizerKind::adam;
  scalar().optimize(p, w_.data(), has_m ? m_.data() : nullptr, has_v ? v_.data() : nullptr, g_.data(), w_.size());
}

uint64_t PsModel::mismatches(Dtype d, const std::byte* buf) const {
  const size_t eb = dtype_bytes(d);
  scratch_.resize(w_.size() * eb);
  scalar().narrow(scratch_.data(), w_.data(), d, w_.size());
  uint64_t bad = 0;
  for (uint64_t i = 0; i < w_.size(); ++i) bad += std::memcmp(buf + i * eb, scratch_.data() + i * eb, eb) != 0 ? 1 : 0;
  return bad;
}

}  // namespace phub::demo

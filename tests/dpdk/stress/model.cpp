// The scalar model of a job (see model.hpp).
#include "model.hpp"

#include <cmath>
#include <stdexcept>

#include "phub/agg/kernels.hpp"

namespace phub::stress {
namespace {

const agg::Kernels& scalar() { return agg::kernels_for(agg::Isa::scalar); }

// The config's optimizer as the kernels take it (kernels.hpp: torch's semantics; step and grad_scale per round).
agg::OptimizerParams optimizer_params(const config::Optimizer& o) {
  static constexpr agg::OptimizerKind kKinds[] = {agg::OptimizerKind::sgd, agg::OptimizerKind::momentum,
                                                  agg::OptimizerKind::nesterov, agg::OptimizerKind::adam};
  return {.kind = kKinds[static_cast<size_t>(o.kind)], .lr = o.lr, .momentum = o.momentum, .beta1 = o.beta1,
          .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay, .adamw = o.adamw};
}

// The float nearest to x from below / from above.
float float_below(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, -INFINITY);
  return f;
}
float float_above(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, INFINITY);
  return f;
}

// What the server turns an fp32 sum into: the mean's scaling, then the job's dtype (decoded back to float
// here, for comparing).
void finish_like_server(std::vector<float>& v, float scale, Dtype d) {
  if (scale != 1.0F) scalar().scale(v.data(), scale, v.size());
  std::vector<std::byte> narrow(v.size() * dtype_bytes(d));
  scalar().narrow(narrow.data(), v.data(), d, v.size());
  scalar().init(v.data(), narrow.data(), d, v.size());
}

}  // namespace

Model::Model(const JobShape& shape, const proto::Layout& layout, const PushValues& values)
    : shape_(shape), values_(values), bit_exact_(shape.bit_exact()), chunks_(layout.chunk_count()) {
  for (uint32_t c = 0; c < layout.chunk_count(); ++c) compute_chunk(c, layout.chunk(c).elems, chunks_[c]);
}

void Model::compute_chunk(uint32_t chunk, uint32_t n, ChunkResults& out) const {
  const agg::Kernels& k = scalar();
  const config::Job& job = shape_.job;
  const Dtype d = job.dtype;
  const bool ps = job.mode == config::JobMode::ps;
  const uint16_t workers = job.workers;
  const float scale = job.reduce == config::Reduce::mean ? 1.0F / static_cast<float>(workers) : 1.0F;
  const size_t out_bytes = static_cast<size_t>(n) * dtype_bytes(d);
  out.by_round.assign(shape_.rounds + 1, std::vector<std::byte>(out_bytes));
  if (!bit_exact_) {
    out.low.assign(shape_.rounds + 1, {});
    out.high.assign(shape_.rounds + 1, {});
  }

  std::vector<float> weights, moment1, moment2;
  agg::OptimizerParams params = optimizer_params(job.optimizer);
  if (ps) {
    std::vector<std::byte> init(static_cast<size_t>(n) * 4);
    values_.initial_weights(chunk, 0, n, Dtype::fp32, init.data());
    weights.resize(n);
    k.init(weights.data(), init.data(), Dtype::fp32, n);
    if (params.kind != agg::OptimizerKind::sgd) moment1.assign(n, 0.0F);
    if (params.kind == agg::OptimizerKind::adam) moment2.assign(n, 0.0F);
    k.narrow(out.by_round[0].data(), weights.data(), d, n);
  }

  std::vector<std::byte> pushed(static_cast<size_t>(n) * dtype_bytes(d));
  std::vector<float> sum(n), widened(n);
  std::vector<double> exact(n), magnitude(n);
  for (uint32_t r = 0; r < shape_.rounds; ++r) {
    std::fill(exact.begin(), exact.end(), 0.0);
    std::fill(magnitude.begin(), magnitude.end(), 0.0);
    for (uint16_t rank = 0; rank < workers; ++rank) {
      values_.gradient(chunk, r, rank, 0, n, pushed.data());
      if (rank == 0) {
        k.init(sum.data(), pushed.data(), d, n);
      } else {
        k.accumulate(sum.data(), pushed.data(), d, n);
      }
      if (bit_exact_) continue;
      k.init(widened.data(), pushed.data(), d, n);
      for (uint32_t i = 0; i < n; ++i) {
        exact[i] += widened[i];  // exact: see mixed_float in values.cpp
        magnitude[i] += std::fabs(widened[i]);
      }
    }
    std::byte* res = out.by_round[r + 1].data();
    if (ps) {
      params.step = r + 1;
      params.grad_scale = scale;
      k.optimize(params, weights.data(), moment1.empty() ? nullptr : moment1.data(),
                 moment2.empty() ? nullptr : moment2.data(), sum.data(), n);
      k.narrow(res, weights.data(), d, n);
      continue;
    }
    if (scale != 1.0F) k.scale(sum.data(), scale, n);
    k.narrow(res, sum.data(), d, n);
    if (bit_exact_) continue;
    const double u = 0x1p-24;
    const double gamma = (workers - 1) * u / (1 - (workers - 1) * u);
    std::vector<float>& lo = out.low[r + 1];
    std::vector<float>& hi = out.high[r + 1];
    lo.resize(n);
    hi.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      lo[i] = float_below(exact[i] - gamma * magnitude[i]);
      hi[i] = float_above(exact[i] + gamma * magnitude[i]);
    }
    finish_like_server(lo, scale, d);
    finish_like_server(hi, scale, d);
  }
}

std::span<const std::byte> Model::result(uint32_t chunk, int64_t round) const {
  const auto& rounds = chunks_.at(chunk).by_round;
  if (round < -1 || round + 1 >= static_cast<int64_t>(rounds.size())) {
    throw std::out_of_range("model: no result of round " + std::to_string(round));
  }
  return rounds[static_cast<size_t>(round + 1)];
}

float Model::lowest(uint32_t chunk, int64_t round, uint32_t elem) const {
  return chunks_.at(chunk).low.at(static_cast<size_t>(round + 1)).at(elem);
}

float Model::highest(uint32_t chunk, int64_t round, uint32_t elem) const {
  return chunks_.at(chunk).high.at(static_cast<size_t>(round + 1)).at(elem);
}

}  // namespace phub::stress

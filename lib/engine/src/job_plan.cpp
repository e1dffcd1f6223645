// Job planning: the chunk map, the arithmetic, the key and the memory estimate of a job (see job_plan.hpp).
#include "phub/engine/job_plan.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/session.hpp"

namespace phub::engine {
namespace {

agg::OptimizerParams map_optimizer(const config::Optimizer& o) {
  agg::OptimizerParams p;
  switch (o.kind) {
    case config::OptimizerKind::sgd: p.kind = agg::OptimizerKind::sgd; break;
    case config::OptimizerKind::momentum: p.kind = agg::OptimizerKind::momentum; break;
    case config::OptimizerKind::nesterov: p.kind = agg::OptimizerKind::nesterov; break;
    case config::OptimizerKind::adam: p.kind = agg::OptimizerKind::adam; break;
  }
  p.lr = o.lr;
  p.momentum = o.momentum;
  p.beta1 = o.beta1;
  p.beta2 = o.beta2;
  p.eps = o.eps;
  p.weight_decay = o.weight_decay;
  p.adamw = o.adamw;
  return p;
}

}  // namespace

std::string job_label(const config::Job& j) { return "job '" + j.name + "' (id " + std::to_string(j.id) + ")"; }

Expected<JobPlan, std::string> plan_job(const config::Job& job, uint16_t lcores, uint16_t mtu,
                                        const agg::Kernels& kernels) {
  JobPlan p;
  p.cfg = job;
  p.lcores = lcores;
  const uint32_t seg = proto::job_segment_elems(mtu, job.dtype, job.mode == config::JobMode::ps);
  if (seg == 0) return unexpected(job_label(job) + ": MTU " + std::to_string(mtu) + " leaves no room for elements");

  proto::LayoutParams lp;
  for (const auto& k : job.keys) lp.key_elems.push_back(k.elems);
  lp.chunk_elems = job.chunk_bytes / 4;
  lp.owners = static_cast<uint16_t>(lcores * job.shard_count);
  lp.segment_elems = seg;
  auto layout = proto::Layout::build(lp);
  if (!layout) return unexpected(job_label(job) + ": " + layout.error());
  p.layout = std::move(*layout);

  JobMath& m = p.math;
  m.kernels = &kernels;
  m.workers = job.workers;
  m.bitmap_words = static_cast<uint16_t>((job.workers + 63) / 64);
  m.in_dtype = job.dtype;
  m.out_dtype = job.dtype;
  m.ps = job.mode == config::JobMode::ps;
  m.mean = job.reduce == config::Reduce::mean;
  m.deterministic = job.deterministic;
  m.segment_elems = seg;
  m.round_modulus = job.round_modulus;
  m.optimizer = map_optimizer(job.optimizer);
  p.state_piece_elems = m.ps ? proto::job_segment_elems(mtu, Dtype::fp32, true) : 0;

  p.authenticated = !job.secret.empty();
  if (p.authenticated) {
    p.key = proto::derive_key(job.secret, job.id);
    p.handshake_key = proto::handshake_key(p.key);
  }
  p.gate = !p.authenticated ? GateMode::open : job.sessions ? GateMode::sessions : GateMode::job_key;
  p.rate_per_lcore_pps = job.rate_limit_pps == 0 ? 0 : (job.rate_limit_pps + lcores - 1) / lcores;
  p.answer_bytes_per_lcore_s = job.answer_bytes_per_s == 0 ? 0 : (job.answer_bytes_per_s + lcores - 1) / lcores;
  p.first_owner = static_cast<uint16_t>(job.shard_index * lcores);
  p.memory = estimate_job_memory(m, p.layout, p.first_owner, lcores);
  // A checkpoint copies the weights and moments of the shard once more (docs/persistence.md). (A ps job
  // spread over racks is never checkpointed: plan_hierarchy takes this back.)
  if (m.ps && job.checkpoint.enabled()) p.memory.checkpoint_copy = p.memory.optimizer;
  if (auto q = check_quota(p); !q) return unexpected(q.error());
  return p;
}

Expected<void, std::string> check_quota(const JobPlan& p) {
  const config::Job& job = p.cfg;
  if (job.quota_bytes != 0 && p.memory.total() > job.quota_bytes) {
    return unexpected(job_label(job) + " refused: it needs " + p.memory.describe() + ", over its quota of " +
                      std::to_string(job.quota_bytes) + " bytes");
  }
  return {};
}

}  // namespace phub::engine

// The epoch generator (see shape.hpp).
#include "shape.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "phub/proto/frame.hpp"
#include "phub/proto/layout.hpp"
#include "rng.hpp"

namespace phub::stress {
namespace {

// Pushes one job may take in an epoch (workers x segments x rounds): keeps an epoch around a second.
constexpr uint64_t kPushBudget = 6000;
constexpr uint32_t kMaxRounds = 12;

uint16_t pick_workers(Rng& r) {
  static constexpr uint16_t kCommon[] = {1, 2, 3, 4, 5, 7, 8, 16, 31, 32};
  return r.chance(0.5) ? r.pick(kCommon) : static_cast<uint16_t>(r.between(1, 32));
}

// Odd sizes: one element, primes, around whole segments, small, large.
uint64_t pick_key_elems(Rng& r, uint32_t segment_elems) {
  static constexpr uint64_t kPrimes[] = {2, 3, 13, 351, 353, 701, 1021, 2039, 4099, 7919, 10007};
  switch (r.below(6)) {
    case 0: return 1;
    case 1: return r.pick(kPrimes);
    case 2: return static_cast<uint64_t>(segment_elems) * r.between(1, 8) + r.between(0, 2) - 1;
    case 3: return static_cast<uint64_t>(r.between(1, 400));
    default: return static_cast<uint64_t>(r.between(1, 20000));
  }
}

// Valid per lib/config: a multiple of 64 from 1 KiB to 1 MiB.
uint32_t pick_chunk_bytes(Rng& r) {
  static constexpr uint32_t kSizes[] = {1024, 1408, 2816, 4096, 8192, 32768, 65536, 1U << 20};
  if (r.chance(0.3)) return 64 * static_cast<uint32_t>(r.between(16, 1024));
  return r.pick(kSizes);
}

config::Optimizer pick_optimizer(Rng& r) {
  static constexpr float kLr[] = {1.0F, 0.5F, 0.1F, 0.01F, 0.001F};
  static constexpr float kMomentum[] = {0.0F, 0.5F, 0.9F, 0.99F};
  config::Optimizer o;
  o.kind = static_cast<config::OptimizerKind>(r.below(4));
  o.lr = r.pick(kLr);
  o.momentum = r.pick(kMomentum);
  if (r.chance(0.3)) {
    o.beta1 = 0.8F;
    o.beta2 = 0.99F;
    o.eps = 1e-6F;
  }
  if (r.chance(0.3)) o.weight_decay = r.chance(0.5) ? 0.01F : 0.1F;
  o.adamw = o.kind == config::OptimizerKind::adam && r.chance(0.5);
  return o;
}

Knobs pick_knobs(Rng& r, uint16_t lcores, bool ps, bool rounds_wrap) {
  Knobs k;
  if (r.chance(0.15)) return k;  // a calm job: the plain path must work too
  k.duplicate = 0.15 * r.unit();
  k.lose_push = 0.05 * r.unit();
  k.late_push = 0.05 * r.unit();
  k.rerequest = 0.05 * r.unit();
  k.lose_result = 0.1 * r.unit();
  k.hold_result = 0.05 * r.unit();
  // A packet handed from lcore to lcore can be overtaken by any number of others (an lcore may sleep for a
  // time slice): where rounds wrap, one held up for a modulus of rounds would alias the current round, so
  // such jobs keep every packet on the owner's queue, in order.
  k.misdirect = lcores > 1 && !rounds_wrap ? 0.4 * r.unit() : 0;
  k.stall = 0.003 * r.unit();
  if (ps) {
    k.pull = 0.05 * r.unit();
    k.init_again = 0.2 * r.unit();
    k.early_push = 0.5 * r.unit();
  }
  return k;
}

uint64_t segments_of(const config::Job& j, uint16_t lcores) {
  const proto::Layout layout = layout_of(j, lcores);
  uint64_t n = 0;
  for (const auto& c : layout.chunks()) n += c.segments;
  return n;
}

// Rounds within the push budget, at least enough to wrap a round modulus; keys shrink until that fits.
void fit_rounds(JobShape& s, uint16_t lcores) {
  const uint32_t least = s.job.round_modulus != 0 ? s.job.round_modulus + 2 : 2;
  for (;;) {
    const uint64_t per_round = segments_of(s.job, lcores) * s.job.workers;
    const uint64_t fit = kPushBudget / per_round;
    if (fit >= least) {
      s.rounds = static_cast<uint32_t>(std::min<uint64_t>(fit, kMaxRounds));
      return;
    }
    for (auto& k : s.job.keys) k.elems = std::max<uint64_t>(1, k.elems / 2);
  }
}

JobShape pick_job(Rng& r, uint32_t index, uint16_t lcores) {
  JobShape s;
  config::Job& j = s.job;
  j.id = index + 1 + 10 * static_cast<uint32_t>(r.below(100000));
  j.name = "stress" + std::to_string(j.id);
  j.port_base = static_cast<uint16_t>(40000 + 100 * index);
  j.quota_bytes = 1ULL << 30;
  j.mode = r.chance(0.35) ? config::JobMode::ps : config::JobMode::allreduce;
  const bool ps = j.mode == config::JobMode::ps;
  static constexpr Dtype kDtypes[] = {Dtype::fp32, Dtype::fp32, Dtype::bf16, Dtype::fp16};
  j.dtype = r.pick(kDtypes);
  j.deterministic = r.chance(0.3);
  j.workers = pick_workers(r);
  j.chunk_bytes = pick_chunk_bytes(r);
  const auto keys = r.between(1, 4);
  for (int64_t k = 0; k < keys; ++k) {
    j.keys.push_back({"k" + std::to_string(k), pick_key_elems(r, proto::segment_elems(kMtu, j.dtype))});
  }
  j.reduce = r.chance(0.5) ? config::Reduce::mean : config::Reduce::sum;
  if (r.chance(0.3)) j.round_modulus = static_cast<uint32_t>(r.between(4, 8));
  if (r.chance(0.25)) j.secret = "secret-" + std::to_string(r.next());
  if (ps) j.optimizer = pick_optimizer(r);
  // ps replays the optimizer bit for bit, which needs exact sums: integers unless summed in rank order.
  const double floats = j.deterministic ? 0.8 : (ps ? 0.0 : 0.25);
  s.values = r.chance(floats) ? Values::random_floats : Values::small_integers;
  fit_rounds(s, lcores);
  s.knobs = pick_knobs(r, lcores, ps, j.round_modulus != 0);
  return s;
}

const char* optimizer_name(config::OptimizerKind k) {
  static constexpr const char* kNames[] = {"sgd", "momentum", "nesterov", "adam"};
  return kNames[static_cast<size_t>(k)];
}

}  // namespace

proto::Layout layout_of(const config::Job& job, uint16_t lcores) {
  proto::LayoutParams p;
  for (const auto& k : job.keys) p.key_elems.push_back(k.elems);
  p.chunk_elems = job.chunk_bytes / 4;
  p.owners = lcores;
  p.segment_elems = proto::job_segment_elems(kMtu, job.dtype, job.mode == config::JobMode::ps);
  auto l = proto::Layout::build(p);
  if (!l) throw std::logic_error("layout of job " + std::to_string(job.id) + ": " + l.error());
  return std::move(*l);
}

EpochShape generate_epoch(uint64_t seed, uint64_t epoch) {
  Rng r(hash_of({seed, epoch, 0x5ea9e}));
  EpochShape e;
  e.lcores = static_cast<uint16_t>(r.between(1, 2));
  // Longer than an epoch's rounds take (a round spans the random order of all the epoch's pushes), so that
  // mostly the rounds a stalled rank holds up are reported.
  e.round_stall_ms = static_cast<uint32_t>(r.between(250, 500));
  const auto jobs = r.between(1, 4);
  for (int64_t j = 0; j < jobs; ++j) e.jobs.push_back(pick_job(r, static_cast<uint32_t>(j), e.lcores));
  return e;
}

std::string JobShape::describe() const {
  std::ostringstream o;
  o << "job id " << job.id << ": " << (job.mode == config::JobMode::ps ? "ps" : "allreduce");
  if (job.mode == config::JobMode::ps) {
    const auto& p = job.optimizer;
    o << " " << optimizer_name(p.kind) << " lr=" << p.lr << " momentum=" << p.momentum << " beta1=" << p.beta1
      << " beta2=" << p.beta2 << " eps=" << p.eps << " weight_decay=" << p.weight_decay << (p.adamw ? " adamw" : "");
  }
  o << (job.deterministic ? " deterministic" : " arrival-order") << " " << dtype_name(job.dtype) << " workers="
    << job.workers << " keys=[";
  for (size_t k = 0; k < job.keys.size(); ++k) o << (k ? "," : "") << job.keys[k].elems;
  o << "] chunk_bytes=" << job.chunk_bytes << " reduce=" << (job.reduce == config::Reduce::mean ? "mean" : "sum")
    << " round_modulus=" << job.round_modulus << " rounds=" << rounds
    << " values=" << (values == Values::small_integers ? "small_integers" : "random_floats")
    << (job.secret.empty() ? "" : " secret") << "\n    knobs: duplicate=" << knobs.duplicate
    << " lose_push=" << knobs.lose_push << " late_push=" << knobs.late_push << " rerequest=" << knobs.rerequest
    << " lose_result=" << knobs.lose_result << " hold_result=" << knobs.hold_result
    << " misdirect=" << knobs.misdirect << " stall=" << knobs.stall << " pull=" << knobs.pull
    << " init_again=" << knobs.init_again << " early_push=" << knobs.early_push;
  return o.str();
}

std::string EpochShape::describe() const {
  std::ostringstream o;
  o << "lcores=" << lcores << " round_stall_ms=" << round_stall_ms << " jobs=" << jobs.size();
  for (size_t j = 0; j < jobs.size(); ++j) o << "\n  [" << j << "] " << jobs[j].describe();
  return o.str();
}

}  // namespace phub::stress

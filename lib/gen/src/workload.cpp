// Building a job's workload: chunk map, push templates, rank-order sums and expected results.
#include "phub/gen/workload.hpp"

#include "phub/base/bytes.hpp"
#include "phub/proto/frame.hpp"

namespace phub::gen {

const agg::Kernels& reference_kernels() noexcept { return agg::kernels_for(agg::Isa::scalar); }

std::string describe(const JobSpec& s) {
  uint64_t elems = 0;
  for (uint64_t e : s.key_elems) elems += e;
  std::string mode = s.mode == Mode::ps ? "ps" : "allreduce";
  mode += s.mean ? " mean" : " sum";
  if (s.deterministic) mode += " deterministic";
  return "job '" + s.name + "' (id " + std::to_string(s.id) + "): " + mode + ", " + std::to_string(s.workers) +
         " workers, " + std::string(dtype_name(s.dtype)) + ", " + std::to_string(elems) + " elems in " +
         std::to_string(s.key_elems.size()) + " keys, udp " + std::to_string(s.port_base) + ".." +
         std::to_string(s.port_base + s.server_lcores - 1) +
         (s.values == Values::order_sensitive ? ", order-sensitive values" : "");
}

proto::Hparams hparams_of(const agg::OptimizerParams& o) {
  proto::Hparams h;
  h.lr = o.lr;
  h.weight_decay = o.weight_decay;
  if (o.kind == agg::OptimizerKind::adam) {
    h.family = o.adamw ? proto::HparamsFamily::adamw : proto::HparamsFamily::adam;
    h.beta1 = o.beta1;
    h.beta2 = o.beta2;
    h.eps = o.eps;
  } else {
    h.family = proto::HparamsFamily::sgd;
    h.momentum = o.kind == agg::OptimizerKind::sgd ? 0.0 : o.momentum;
    h.nesterov = o.kind == agg::OptimizerKind::nesterov;
  }
  return h;
}

Expected<Workload, std::string> Workload::build(const JobSpec& spec, uint16_t ip_mtu) {
  const std::string who = "job '" + spec.name + "' (id " + std::to_string(spec.id) + ")";
  if (spec.workers == 0) return unexpected(who + ": no workers");
  if (spec.chunk_bytes < 64 || spec.chunk_bytes % 4 != 0) return unexpected(who + ": bad chunk_bytes");
  Workload w;
  w.spec_ = spec;
  w.seg_elems_ = proto::job_segment_elems(ip_mtu, spec.dtype, spec.mode == Mode::ps);
  if (w.seg_elems_ == 0) return unexpected(who + ": MTU " + std::to_string(ip_mtu) + " leaves no room for elements");
  proto::LayoutParams lp;
  lp.key_elems = spec.key_elems;
  lp.chunk_elems = spec.chunk_bytes / 4;
  lp.owners = spec.server_lcores;
  lp.segment_elems = w.seg_elems_;
  auto layout = proto::Layout::build(lp);
  if (!layout) return unexpected(who + ": " + layout.error());
  w.layout_ = std::move(*layout);
  for (const auto& c : w.layout_.chunks()) w.segments_total_ += c.segments;
  if (w.authenticated()) w.key_ = proto::derive_key(spec.secret, spec.id);
  if (spec.hparams) {
    if (spec.mode != Mode::ps) return unexpected(who + ": hyperparameter sets belong to ps jobs");
    w.hparams_ = proto::encode_hparams(hparams_of(spec.optimizer));
    store_be<uint64_t>(w.tail_.data(), proto::hparams_id(w.hparams_));
  }

  const agg::Kernels& k = reference_kernels();
  const size_t n = w.seg_elems_;
  const size_t sb = w.seg_bytes();
  w.pushes_.resize(kPatterns * spec.workers * sb);
  w.push_crcs_.resize(kPatterns * spec.workers);
  w.sums_.resize(kPatterns * n);
  w.results_.resize(kPatterns * sb);
  w.inits_.resize(kPatterns * sb);
  std::vector<float> values(n);
  for (uint32_t p = 0; p < kPatterns; ++p) {
    float* sum = w.sums_.data() + p * n;
    for (uint16_t r = 0; r < spec.workers; ++r) {
      fill_push_values(spec.values, spec.dtype, spec.workers, p, r, values);
      std::byte* wire = w.pushes_.data() + (static_cast<size_t>(p) * spec.workers + r) * sb;
      k.narrow(wire, values.data(), spec.dtype, n);  // exact: every value is representable
      w.push_crcs_[p * spec.workers + r] = proto::crc32c(std::span<const std::byte>(wire, sb));
      // Rank order, starting from rank 0's widened values: what init() then accumulate()s compute.
      if (r == 0) {
        k.init(sum, wire, spec.dtype, n);
      } else {
        k.accumulate(sum, wire, spec.dtype, n);
      }
    }
    std::vector<float> scaled(sum, sum + n);
    if (spec.mean) k.scale(scaled.data(), w.grad_scale(), n);
    k.narrow(w.results_.data() + p * sb, scaled.data(), spec.dtype, n);
    fill_init_weights(p, values);
    k.narrow(w.inits_.data() + p * sb, values.data(), spec.dtype, n);  // a segment fits one packet only in the job's dtype
  }
  return w;
}

void Workload::set_epoch(uint16_t owner, uint16_t epoch) {
  if (epochs_.size() <= owner) epochs_.resize(static_cast<size_t>(owner) + 1, 0);
  epochs_[owner] = epoch;
}

uint64_t Workload::logical_round(uint32_t wire, uint64_t reference) const noexcept {
  const uint64_t mod = spec_.round_modulus == 0 ? (uint64_t{1} << 32) : spec_.round_modulus;
  const uint64_t ref_wire = reference % mod;
  // Distance back from the reference, in [-(mod/2), mod/2).
  int64_t back = static_cast<int64_t>((ref_wire + mod - wire) % mod);
  if (back > static_cast<int64_t>(mod / 2)) back -= static_cast<int64_t>(mod);
  return back > static_cast<int64_t>(reference) ? 0 : reference - back;
}

}  // namespace phub::gen

// Job planning (layout, math, auth, memory) and the per-lcore chunk memory of a job.
#include "phub/engine/job.hpp"

#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#include <atomic>
#include <cmath>
#include <new>

namespace phub::engine {
namespace {

constexpr uint64_t round64(uint64_t n) noexcept { return (n + 63) / 64 * 64; }

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

// Called by whoever frees the last mbuf of a replaced result buffer: it becomes a spare again.
void return_result_buffer(void* /*addr*/, void* opaque) {
  auto* b = static_cast<ResultBuf*>(opaque);
  if (rte_ring_mp_enqueue(b->home, b) != 0) {
    // Cannot happen: the ring holds every buffer of the job. Keep the buffer out of circulation.
  }
}

// IOVA of a buffer inside DPDK memory (in IOVA-as-VA mode, the address itself).
rte_iova_t iova_of(const void* p) noexcept {
  if (rte_eal_iova_mode() == RTE_IOVA_VA) return reinterpret_cast<uintptr_t>(p);
  return rte_mem_virt2iova(p);
}

std::string job_name(const config::Job& j) { return "job '" + j.name + "' (id " + std::to_string(j.id) + ")"; }

}  // namespace

Expected<JobPlan, std::string> plan_job(const config::Job& job, uint16_t lcores, uint16_t mtu,
                                        const agg::Kernels& kernels) {
  JobPlan p;
  p.cfg = job;
  p.lcores = lcores;
  const uint32_t seg = proto::segment_elems(mtu, job.dtype);
  if (seg == 0) return unexpected(job_name(job) + ": MTU " + std::to_string(mtu) + " leaves no room for elements");

  proto::LayoutParams lp;
  for (const auto& k : job.keys) lp.key_elems.push_back(k.elems);
  lp.chunk_elems = job.chunk_bytes / 4;
  lp.owners = static_cast<uint16_t>(lcores * job.shard_count);
  lp.segment_elems = seg;
  auto layout = proto::Layout::build(lp);
  if (!layout) return unexpected(job_name(job) + ": " + layout.error());
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

  p.authenticated = !job.secret.empty();
  if (p.authenticated) p.key = proto::derive_key(job.secret);
  p.rate_per_lcore_pps = job.rate_limit_pps == 0 ? 0 : (job.rate_limit_pps + lcores - 1) / lcores;
  p.first_owner = static_cast<uint16_t>(job.shard_index * lcores);
  p.memory = estimate_job_memory(m, p.layout, p.first_owner, lcores);
  if (job.quota_bytes != 0 && p.memory.total() > job.quota_bytes) {
    return unexpected(job_name(job) + " refused: it needs " + p.memory.describe() + ", over its quota of " +
                      std::to_string(job.quota_bytes) + " bytes");
  }
  return p;
}

Expected<std::unique_ptr<LcoreJob>, std::string> LcoreJob::create(const JobPlan& plan, uint16_t lcore, int socket) {
  static std::atomic<uint32_t> serial{0};
  std::unique_ptr<LcoreJob> lj(new LcoreJob());
  lj->plan_ = &plan;
  const JobMath& m = plan.math;
  const auto owned = plan.layout.owned(static_cast<uint16_t>(plan.first_owner + lcore));
  const auto n = static_cast<uint32_t>(owned.size());
  const std::string who = job_name(plan.cfg) + " on lcore index " + std::to_string(lcore);
  auto fail = [&](const std::string& what, uint64_t bytes) {
    return unexpected(who + ": cannot allocate " + what + " (" + std::to_string(bytes) +
                      " bytes): server memory exhausted");
  };

  uint64_t arena_bytes = 0;
  for (uint32_t id : owned) {
    const auto& ci = plan.layout.chunk(id);
    arena_bytes += chunk_sizes(m, ci.elems, ci.segments).arena_total();
  }
  const uint64_t chunks_bytes = round64(sizeof(Chunk) * std::max<uint32_t>(n, 1));
  const uint64_t peers_bytes = round64(sizeof(Peer) * m.workers);
  const uint32_t spares = spare_results(n);
  const uint32_t objects = 2 * n + spares;
  const uint64_t result_bytes = static_cast<uint64_t>(plan.layout.params().chunk_elems) * dtype_bytes(m.out_dtype);
  const uint64_t obj_bytes = result_object_bytes(result_bytes);

  if (arena_bytes != 0) {
    lj->arena_ = static_cast<std::byte*>(rte_zmalloc_socket("phub_arena", arena_bytes, 64, socket));
    if (lj->arena_ == nullptr) return fail("chunk state", arena_bytes);
  }
  lj->chunks_ = static_cast<Chunk*>(rte_zmalloc_socket("phub_chunks", chunks_bytes, 64, socket));
  if (lj->chunks_ == nullptr) return fail("chunk records", chunks_bytes);
  lj->peers_ = static_cast<Peer*>(rte_zmalloc_socket("phub_peers", peers_bytes, 64, socket));
  if (lj->peers_ == nullptr) return fail("peer table", peers_bytes);
  lj->result_block_ = static_cast<std::byte*>(rte_zmalloc_socket("phub_results", objects * obj_bytes, 64, socket));
  if (lj->result_block_ == nullptr) return fail("result buffers", objects * obj_bytes);
  const std::string ring_name = "phub_rb" + std::to_string(serial.fetch_add(1));
  lj->spares_ = rte_ring_create(ring_name.c_str(), rte_align32pow2(spares + 1), socket, RING_F_SC_DEQ);
  if (lj->spares_ == nullptr) return unexpected(who + ": spare ring: " + rte_strerror(rte_errno));
  lj->allocated_bytes =
      arena_bytes + chunks_bytes + peers_bytes + objects * obj_bytes + spares_ring_bytes(spares);

  for (uint32_t i = 0; i < objects; ++i) {
    auto* b = new (lj->result_block_ + i * obj_bytes) ResultBuf{};
    b->data = lj->result_block_ + i * obj_bytes + round64(sizeof(ResultBuf));
    b->data_iova = iova_of(b->data);
    b->home = lj->spares_;
    b->shinfo.free_cb = return_result_buffer;
    b->shinfo.fcb_opaque = b;
    rte_mbuf_ext_refcnt_set(&b->shinfo, 1);
    if (i >= 2 * n) (void)rte_ring_mp_enqueue(lj->spares_, b);
  }

  std::byte* arena = lj->arena_;
  for (uint32_t i = 0; i < n; ++i) {
    const auto& ci = plan.layout.chunk(owned[i]);
    Chunk* c = new (&lj->chunks_[i]) Chunk{};
    c->id = owned[i];
    c->elems = ci.elems;
    c->segments = ci.segments;
    arena += carve_chunk(m, *c, arena);
    lj->attach(*c, 0, reinterpret_cast<ResultBuf*>(lj->result_block_ + (2 * i) * obj_bytes));
    lj->attach(*c, 1, reinterpret_cast<ResultBuf*>(lj->result_block_ + (2 * i + 1) * obj_bytes));
  }
  lj->chunk_count_ = n;
  return lj;
}

LcoreJob::~LcoreJob() {
  rte_ring_free(spares_);
  rte_free(result_block_);
  rte_free(peers_);
  rte_free(chunks_);
  rte_free(arena_);
}

void LcoreJob::attach(Chunk& c, int i, ResultBuf* b) noexcept {
  c.out_handle[i] = b;
  c.out[i] = b->data;
}

bool LcoreJob::renew_previous(Chunk& c) noexcept {
  const int prev = c.cur ^ 1;
  ResultBuf* old = buf(c, prev);
  if (!busy(old)) return true;
  void* spare = nullptr;
  if (rte_ring_sc_dequeue(spares_, &spare) != 0) return false;
  auto* fresh = static_cast<ResultBuf*>(spare);
  rte_mbuf_ext_refcnt_set(&fresh->shinfo, 1);
  attach(c, prev, fresh);
  // Drop the chunk's reference; if the transmits finished meanwhile, the buffer is a spare right away.
  if (rte_mbuf_ext_refcnt_update(&old->shinfo, -1) == 0) return_result_buffer(old->data, old);
  return true;
}

void LcoreJob::forget_peers() noexcept {
  for (uint16_t r = 0; r < plan_->math.workers; ++r) {
    peers_[r].known = false;
    peers_[r].incarnation = 0;
  }
}

bool LcoreJob::admit_packet(uint64_t now_tsc, uint64_t tsc_hz) noexcept {
  const uint64_t rate = plan_->rate_per_lcore_pps;
  if (rate == 0) return true;
  const double burst = std::max<double>(32.0, static_cast<double>(rate) / 100.0);
  if (tokens_tsc_ == 0) {
    tokens_ = burst;
  } else {
    tokens_ += static_cast<double>(now_tsc - tokens_tsc_) * static_cast<double>(rate) / static_cast<double>(tsc_hz);
    tokens_ = std::min(tokens_, burst);
  }
  tokens_tsc_ = now_tsc;
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

}  // namespace phub::engine

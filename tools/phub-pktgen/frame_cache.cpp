// Building and releasing the pre-built frames.
#include "frame_cache.hpp"

#include <cstdio>

namespace phub::pktgen {

FrameCache::FrameCache(const JobRuntime& job, const gen::Partition& part, uint64_t budget_bytes,
                       const std::string& name, int socket) {
  const gen::JobSpec& spec = job.wl.spec();
  const uint64_t frames = uint64_t{spec.round_modulus} * part.slots().size() * spec.workers;
  const uint32_t room = proto::kFrameHeadersBytes + job.wl.segment_elems() * static_cast<uint32_t>(job.wl.in_bytes()) +
                        static_cast<uint32_t>(job.wl.push_tail().size());
  const uint64_t bytes = frames * (room + RTE_PKTMBUF_HEADROOM + sizeof(rte_mbuf) + 64);
  // Logical rounds r and r + modulus must carry the same payload pattern (patterns repeat every kPatterns).
  if (spec.round_modulus == 0 || spec.round_modulus % gen::kPatterns != 0 || frames == 0 || bytes > budget_bytes ||
      frames > UINT32_MAX / 2) {
    return;
  }
  auto pool = drivers::Mempool::create(name, static_cast<uint32_t>(frames), static_cast<uint16_t>(room + RTE_PKTMBUF_HEADROOM),
                                       socket, 0);
  if (!pool) {
    std::fprintf(stderr, "pktgen: frame cache for job %u not built: %s\n", spec.id, pool.error().c_str());
    return;
  }
  pool_ = std::move(*pool);
  modulus_ = spec.round_modulus;
  slots_ = part.slots().size();
  workers_ = spec.workers;
  frames_.resize(frames, nullptr);
  uint32_t seq = 0;
  for (uint64_t r = 0; r < modulus_; ++r) {
    for (uint32_t s = 0; s < slots_; ++s) {
      for (uint16_t w = 0; w < workers_; ++w) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool_.get());
        if (m == nullptr) {
          frames_.clear();
          return;
        }
        frames_[(r * slots_ + s) * workers_ + w] = m;
        const gen::PushOrder o{w, s, r, false, false, false};
        auto* p = rte_pktmbuf_mtod(m, std::byte*);
        const size_t len = gen::write_push_frame(job.wl, job.addrs, part.slots()[s], o, seq++,
                                                 std::span<std::byte>(p, rte_pktmbuf_tailroom(m)));
        (void)rte_pktmbuf_append(m, static_cast<uint16_t>(len));
      }
    }
  }
}

FrameCache::~FrameCache() {
  for (rte_mbuf* m : frames_) {
    if (m != nullptr) rte_pktmbuf_free(m);  // the last reference: everything sent has been freed by now
  }
}

}  // namespace phub::pktgen

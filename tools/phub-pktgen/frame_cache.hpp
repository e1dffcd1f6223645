// Pre-built push frames for jobs whose rounds wrap (round_modulus): every (wire round, segment, rank) frame
// of one lcore's partition built once into its own mbuf, then sent again and again by taking one more
// reference, as Pktgen-DPDK sends a pcap. A push is then as cheap as a template copy (no header build, no
// signing); retransmissions and inits are still built one by one. Off by default (--frame-cache-mb): a job's
// frames do not stay in the CPU cache, and it measured slower than RecycledFrames (0.48 of testpmd txonly in
// the fast machine state, against 0.99).
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lcore.hpp"
#include "phub/drivers/mempool.hpp"

namespace phub::pktgen {

class FrameCache {
 public:
  // Builds the cache for `part` of `job` if its rounds wrap and the frames fit `budget_bytes`; otherwise
  // the cache stays empty (ok() false). `name` must be unique among mempools.
  FrameCache(const JobRuntime& job, const gen::Partition& part, uint64_t budget_bytes, const std::string& name,
             int socket);
  ~FrameCache();
  FrameCache(const FrameCache&) = delete;
  FrameCache& operator=(const FrameCache&) = delete;

  [[nodiscard]] bool ok() const noexcept { return !frames_.empty(); }
  [[nodiscard]] size_t frames() const noexcept { return frames_.size(); }
  // The frame of an original push (a new reference to it), or null when it is not cached.
  [[nodiscard]] rte_mbuf* get(const gen::PushOrder& o) const noexcept {
    if (frames_.empty() || o.init || o.retransmit) return nullptr;
    rte_mbuf* m = frames_[(o.round % modulus_ * slots_ + o.slot) * workers_ + o.rank];
    rte_mbuf_refcnt_update(m, 1);
    return m;
  }

 private:
  drivers::Mempool pool_;
  std::vector<rte_mbuf*> frames_;
  uint64_t modulus_ = 0, slots_ = 0, workers_ = 0;
};

}  // namespace phub::pktgen

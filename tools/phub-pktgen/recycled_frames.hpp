// Push frames sent again and again: for each (payload pattern, rank) of a job a few frames whose payload is
// written once. A whole-segment original push takes one that nothing holds any more (its reference count is
// back to one: the PMD has copied or transmitted it and let it go), has the few header fields that differ
// between such pushes rewritten in place (gen::patch_push_headers), and goes out with one more reference.
// A push then costs a handful of stores, as one of testpmd's txonly frames does, instead of a payload copy
// into a fresh mbuf. A frame still held (queued here, in a zero-copy ring, on a NIC) is never touched; when
// every frame of its set is held, the push is built as usual.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lcore.hpp"
#include "phub/drivers/mempool.hpp"

namespace phub::pktgen {

class RecycledFrames {
 public:
  // `depth` frames per (pattern, rank) of `job` (which must outlive this); none at all (ok() false) when
  // depth is 0 or the pool cannot be made. `name` must be unique among mempools.
  RecycledFrames(const JobRuntime& job, uint32_t depth, const std::string& name, int socket);
  ~RecycledFrames();
  RecycledFrames(const RecycledFrames&) = delete;
  RecycledFrames& operator=(const RecycledFrames&) = delete;

  [[nodiscard]] bool ok() const noexcept { return !frames_.empty(); }
  // Whether a push of `slot` by order `o` can be sent from a recycled frame at all.
  [[nodiscard]] bool fits(const gen::Slot& slot, const gen::PushOrder& o) const noexcept {
    return !frames_.empty() && !o.init && !o.retransmit && slot.elems == seg_elems_;
  }
  // The push (fits() must hold) in a free frame of its set, headers written with sequence number `seq`,
  // holding one more reference; null when all of the set are held.
  [[nodiscard]] rte_mbuf* take(const gen::Slot& slot, const gen::PushOrder& o, uint32_t seq) noexcept;

 private:
  const JobRuntime* job_ = nullptr;
  drivers::Mempool pool_;
  std::vector<rte_mbuf*> frames_;  // [pattern][rank][depth]
  std::vector<uint8_t> written_;   // same order: headers written once in full (later ones are patched)
  uint32_t depth_ = 0, workers_ = 0, seg_elems_ = 0;
  uint16_t frame_bytes_ = 0;
};

}  // namespace phub::pktgen

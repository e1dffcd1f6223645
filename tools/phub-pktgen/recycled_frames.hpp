// Push frames sent again and again: for each (payload pattern, rank) of a job a few frames in DPDK memory whose
// payload is written once. A whole-segment original push takes one that no mbuf points at any more, writes its
// headers in place, and goes out as a one-segment mbuf attached to it (an external buffer). A push then costs
// a header write, as one of testpmd's txonly frames does, instead of a payload copy into a fresh mbuf. A frame
// still in use (queued here, in a zero-copy ring, on a NIC) is never touched; when every frame of its set is,
// the push is built as usual.
// Each frame has its own shared-info with at most one reference, so the PMD's free releases it without an
// atomic read-modify-write (a locked instruction right after the PMD's copy waits for all of the copy's
// stores: measured, that wait was most of the generator's time), and the release callback only clears the
// frame's flag.
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "lcore.hpp"

namespace phub::pktgen {

class RecycledFrames {
 public:
  // `depth` frames per (pattern, rank); none at all (ok() false) when depth is 0 or the memory is short.
  // `mbufs`: a pool of data-room-0 mbufs to attach to the frames.
  RecycledFrames(const JobRuntime& job, uint32_t depth, rte_mempool* mbufs, int socket);
  ~RecycledFrames();
  RecycledFrames(const RecycledFrames&) = delete;
  RecycledFrames& operator=(const RecycledFrames&) = delete;

  [[nodiscard]] bool ok() const noexcept { return !frames_.empty(); }
  [[nodiscard]] size_t frames() const noexcept { return frames_.size(); }
  // Whether a push of `slot` by order `o` can be sent from a recycled frame at all.
  [[nodiscard]] bool fits(const gen::Slot& slot, const gen::PushOrder& o) const noexcept {
    return !frames_.empty() && !o.init && !o.retransmit && slot.elems == seg_elems_;
  }
  // An mbuf attached to a free frame for that push (fits() must hold), its headers still to be written; null
  // when all of its set are in use or no mbuf is left.
  [[nodiscard]] rte_mbuf* take(const gen::Slot& slot, const gen::PushOrder& o) noexcept;

 private:
  struct Frame {
    rte_mbuf_ext_shared_info shinfo;
    std::atomic<uint8_t> in_use{0};  // set here, cleared by the release callback (possibly on another thread)
  };
  static void release(void* addr, void* opaque);

  rte_mempool* mbufs_ = nullptr;
  std::byte* block_ = nullptr;     // the frames' bytes, stride_ apart: [pattern][rank][depth]
  rte_iova_t block_iova_ = 0;
  bool iova_contiguous_ = true;
  std::vector<Frame> frames_;      // same order
  uint32_t depth_ = 0, workers_ = 0, seg_elems_ = 0, stride_ = 0;
  uint16_t frame_bytes_ = 0;
};

}  // namespace phub::pktgen

// Filling and handing out the recycled push frames.
#include "recycled_frames.hpp"

#include <rte_eal.h>
#include <rte_malloc.h>

#include <cstdio>
#include <cstring>

#include "phub/gen/values.hpp"

namespace phub::pktgen {

RecycledFrames::RecycledFrames(const JobRuntime& job, uint32_t depth, rte_mempool* mbufs, int socket) {
  const gen::Workload& wl = job.wl;
  const uint64_t frames = uint64_t{gen::kPatterns} * wl.spec().workers * depth;
  const size_t payload_bytes = wl.segment_elems() * wl.in_bytes();
  const size_t frame_bytes = proto::kFrameHeadersBytes + payload_bytes;
  const size_t stride = (frame_bytes + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
  if (frames == 0 || mbufs == nullptr || frame_bytes > UINT16_MAX || frames > UINT32_MAX / 2) return;
  block_ = static_cast<std::byte*>(rte_malloc_socket("pktgen_recycled", frames * stride, RTE_CACHE_LINE_SIZE, socket));
  if (block_ == nullptr) {
    std::fprintf(stderr, "pktgen: no memory for %lu recycled frames of job %u\n", static_cast<unsigned long>(frames),
                 wl.spec().id);
    return;
  }
  mbufs_ = mbufs;
  block_iova_ = rte_malloc_virt2iova(block_);
  iova_contiguous_ = rte_eal_iova_mode() == RTE_IOVA_VA;
  depth_ = depth;
  workers_ = wl.spec().workers;
  seg_elems_ = wl.segment_elems();
  stride_ = static_cast<uint32_t>(stride);
  frame_bytes_ = static_cast<uint16_t>(frame_bytes);
  frames_ = std::vector<Frame>(frames);
  for (uint32_t k = 0; k < gen::kPatterns; ++k) {
    for (uint16_t rank = 0; rank < workers_; ++rank) {
      const auto payload = wl.push_bytes(k, rank, seg_elems_);
      for (uint32_t d = 0; d < depth; ++d) {
        const size_t i = (static_cast<size_t>(k) * workers_ + rank) * depth + d;
        std::memcpy(block_ + i * stride + proto::kFrameHeadersBytes, payload.data(), payload.size());
        frames_[i].shinfo.free_cb = release;
        frames_[i].shinfo.fcb_opaque = &frames_[i].in_use;
      }
    }
  }
}

RecycledFrames::~RecycledFrames() {
  rte_free(block_);  // nothing points at it: the port, and the frames queued for it, are gone first
}

void RecycledFrames::release(void*, void* opaque) {
  static_cast<std::atomic<uint8_t>*>(opaque)->store(0, std::memory_order_release);
}

rte_mbuf* RecycledFrames::take(const gen::Slot& slot, const gen::PushOrder& o) noexcept {
  // The first free frame of the set: frames released last are reused first, so few of them stay warm in the
  // cache (as a mempool's per-lcore cache hands out the mbufs freed last).
  const size_t first = (static_cast<size_t>(gen::pattern_index(o.round, slot.chunk, slot.seg)) * workers_ + o.rank) * depth_;
  for (size_t i = first; i < first + depth_; ++i) {
    Frame& f = frames_[i];
    if (f.in_use.load(std::memory_order_acquire) != 0) continue;
    rte_mbuf* m = rte_pktmbuf_alloc(mbufs_);
    if (m == nullptr) return nullptr;
    f.in_use.store(1, std::memory_order_relaxed);
    rte_mbuf_ext_refcnt_set(&f.shinfo, 1);  // the one mbuf attached; its free drops it to zero, no atomics
    std::byte* data = block_ + i * stride_;
    const rte_iova_t iova = iova_contiguous_ ? block_iova_ + i * stride_ : rte_malloc_virt2iova(data);
    rte_pktmbuf_attach_extbuf(m, data, iova, frame_bytes_, &f.shinfo);
    m->data_len = frame_bytes_;
    m->pkt_len = frame_bytes_;
    return m;
  }
  return nullptr;
}

}  // namespace phub::pktgen

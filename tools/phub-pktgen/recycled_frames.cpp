// Filling and handing out the recycled push frames.
#include "recycled_frames.hpp"

#include <cstdio>
#include <cstring>

#include "phub/gen/values.hpp"

namespace phub::pktgen {

RecycledFrames::RecycledFrames(const JobRuntime& job, uint32_t depth, const std::string& name, int socket) {
  const gen::Workload& wl = job.wl;
  const uint64_t frames = uint64_t{gen::kPatterns} * wl.spec().workers * depth;
  const size_t payload_bytes = wl.segment_elems() * wl.in_bytes();
  const auto tail = wl.push_tail();  // the same in every push of the job
  const size_t room = proto::kFrameHeadersBytes + payload_bytes + tail.size();
  if (frames == 0 || frames > UINT32_MAX / 2 || room + RTE_PKTMBUF_HEADROOM > UINT16_MAX) return;
  auto pool = drivers::Mempool::create(name, static_cast<uint32_t>(frames), static_cast<uint16_t>(room + RTE_PKTMBUF_HEADROOM),
                                       socket, 0);
  if (!pool) {
    std::fprintf(stderr, "pktgen: recycled frames for job %u not made: %s\n", wl.spec().id, pool.error().c_str());
    return;
  }
  pool_ = std::move(*pool);
  job_ = &job;
  depth_ = depth;
  workers_ = wl.spec().workers;
  seg_elems_ = wl.segment_elems();
  frame_bytes_ = static_cast<uint16_t>(room);
  frames_.reserve(frames);
  for (uint32_t k = 0; k < gen::kPatterns; ++k) {
    for (uint16_t rank = 0; rank < workers_; ++rank) {
      const auto payload = wl.push_bytes(k, rank, seg_elems_);
      for (uint32_t d = 0; d < depth; ++d) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool_.get());
        if (m == nullptr) {
          for (rte_mbuf* f : frames_) rte_pktmbuf_free(f);
          frames_.clear();
          return;
        }
        std::memcpy(rte_pktmbuf_mtod_offset(m, std::byte*, proto::kFrameHeadersBytes), payload.data(), payload.size());
        if (!tail.empty()) {
          std::memcpy(rte_pktmbuf_mtod_offset(m, std::byte*, proto::kFrameHeadersBytes + payload.size()), tail.data(),
                      tail.size());
        }
        frames_.push_back(m);
      }
    }
  }
  written_.assign(frames, 0);
}

RecycledFrames::~RecycledFrames() {
  for (rte_mbuf* m : frames_) rte_pktmbuf_free(m);  // the last reference: the port and the queues are gone first
}

rte_mbuf* RecycledFrames::take(const gen::Slot& slot, const gen::PushOrder& o, uint32_t seq) noexcept {
  // The first free frame of the set: frames released last are reused first, so few of them stay warm in the
  // cache (as a mempool's per-lcore cache hands out the mbufs freed last).
  const size_t first = (static_cast<size_t>(gen::pattern_index(o.round, slot.chunk, slot.seg)) * workers_ + o.rank) * depth_;
  for (size_t i = first; i < first + depth_; ++i) {
    rte_mbuf* m = frames_[i];
    if (rte_mbuf_refcnt_read(m) != 1) continue;
    rte_mbuf_refcnt_set(m, 2);  // alone with it: no atomic needed
    if (m->data_off != RTE_PKTMBUF_HEADROOM || m->data_len != frame_bytes_) {  // a PMD moved it (e.g. a VLAN tag)
      m->data_off = RTE_PKTMBUF_HEADROOM;
      m->data_len = m->pkt_len = frame_bytes_;
      written_[i] = 0;
    }
    const auto headers = std::span<std::byte, proto::kFrameHeadersBytes>(rte_pktmbuf_mtod(m, std::byte*),
                                                                         proto::kFrameHeadersBytes);
    if (written_[i] != 0) {
      gen::patch_push_headers(job_->wl, slot, o, seq, headers);
    } else {
      gen::write_push_headers(job_->wl, job_->addrs, slot, o, seq, headers);
      written_[i] = 1;
    }
    return m;
  }
  return nullptr;
}

}  // namespace phub::pktgen

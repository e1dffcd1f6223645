// The lcore's part of a checkpoint: each chunk's state is copied at that chunk's round boundary into the
// control thread's capture (one chunk at a time: at most one chunk per loop iteration in the background,
// else in the iteration that completes the round or that first pushes the next), and the capture's
// counter says when the shard is whole. The lcore never waits for the other chunks or the file.
#include "phub/engine/lcore.hpp"

namespace phub::engine {

void Lcore::arm_capture(const JobPlan& plan, LcoreJob& lj, const Request& req) noexcept {
  CheckpointCapture& cap = *req.capture;
  if (lj.capture != nullptr || req.round != req.capture->round) {
    cap.failed.store(true, std::memory_order_relaxed);  // another capture still holds this lcore
    return;
  }
  lj.capture = &cap;
  ++capturing_;
  lj.capture_left = 0;
  lj.capture_cursor = 0;
  for (uint32_t i = 0; i < lj.chunk_count(); ++i) {
    const CaptureTiming t = capture_timing(plan.math, lj.chunk(i), cap.round);
    if (t == CaptureTiming::missed) {
      cap.failed.store(true, std::memory_order_relaxed);  // the control thread aims at a later round
      detach_capture(lj);
      return;
    }
    lj.capture_armed[i] = 1;
    ++lj.capture_left;
  }
  if (lj.capture_left == 0) detach_capture(lj);
}

void Lcore::copy_captures(const Snapshot& s) noexcept {
  // One chunk already at its boundary per job and iteration: a chunk's arrays (12 bytes per element with
  // Adam, 96 KiB at the default chunk_bytes) is what one iteration may take on top of its packets.
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    LcoreJob& lj = *s.lcore_jobs[r_.index][j];
    if (lj.capture == nullptr) continue;
    const uint32_t n = lj.chunk_count();
    for (uint32_t k = 0; k < n && lj.capture != nullptr; ++k) {
      const uint32_t i = lj.capture_cursor;
      lj.capture_cursor = i + 1 == n ? 0 : i + 1;
      if (lj.capture_armed[i] == 0 || capture_timing(s.jobs[j]->math, lj.chunk(i), lj.capture->round) != CaptureTiming::now) {
        continue;
      }
      capture_chunk(*s.jobs[j], lj, lj.chunk(i));
      break;
    }
  }
}

void Lcore::capture_chunk(const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept {
  const auto i = static_cast<uint32_t>(&c - &lj.chunk(0));
  CheckpointCapture& cap = *lj.capture;
  if (lj.capture_armed[i] == 0 || capture_timing(plan.math, c, cap.round) != CaptureTiming::now) return;
  lj.capture_armed[i] = 0;
  cap.steps[r_.index][i] = copy_chunk_state(c, cap.round, cap, cap.offset[r_.index][i]);
  bump(lj.counters.checkpoint_chunks_copied);
  // Release: the control thread reads the copied memory once it has counted every chunk.
  cap.copied.fetch_add(1, std::memory_order_release);
  if (--lj.capture_left == 0) detach_capture(lj);
}

void Lcore::detach_capture(LcoreJob& lj) noexcept {
  if (lj.capture != nullptr) --capturing_;
  lj.capture = nullptr;
  lj.capture_left = 0;
  std::fill(lj.capture_armed.begin(), lj.capture_armed.end(), uint8_t{0});
}

}  // namespace phub::engine

// The lcore's part of a checkpoint: each chunk's state is copied at that chunk's round boundary into the
// control thread's capture (a few KB per chunk, in the iteration that completes the round), and the
// capture's counter says when the shard is whole. The lcore never waits for the other chunks or the file.
#include "phub/engine/lcore.hpp"

namespace phub::engine {

void Lcore::arm_capture(const JobPlan& plan, LcoreJob& lj, const Request& req) noexcept {
  CheckpointCapture& cap = *req.capture;
  if (lj.capture != nullptr || req.round != req.capture->round) {
    cap.failed.store(true, std::memory_order_relaxed);  // another capture still holds this lcore
    return;
  }
  lj.capture = &cap;
  lj.capture_left = 0;
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
  for (uint32_t i = 0; i < lj.chunk_count() && lj.capture != nullptr; ++i) {
    if (capture_timing(plan.math, lj.chunk(i), cap.round) == CaptureTiming::now) capture_chunk(plan, lj, lj.chunk(i));
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
  lj.capture = nullptr;
  lj.capture_left = 0;
  std::fill(lj.capture_armed.begin(), lj.capture_armed.end(), uint8_t{0});
}

}  // namespace phub::engine

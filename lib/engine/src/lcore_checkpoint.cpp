// The lcore's part of a checkpoint, copy-on-write per segment: once a chunk is at the capture's round
// boundary it is open, and each segment's slice of its state (weights and moments) is copied into the
// control thread's capture before the next round can change it, i.e. before a packet of that round reaches
// the segment; the background copies the rest, at most kCaptureBytesPerIteration per job and loop iteration.
// No step copies more than one segment's slice at once for a packet, so an iteration's checkpoint work is
// bounded by its frames and the background budget, never a whole chunk or shard. The capture's counter says
// when the shard is whole; the lcore never waits for the other chunks or the file. The thread CPU time of
// every step is summed per iteration (LcoreIo::checkpoint_work_ns), preemption excluded.
#include <time.h>

#include "lcore.hpp"
#include "job_handler.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t kCheckpointWorkBoundNs = 100'000;  // issue 17: no loop gap over 100 us for a checkpoint

uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  (void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Adds the thread CPU time of its scope to `into`.
class WorkTimer {
 public:
  explicit WorkTimer(uint64_t& into) noexcept : into_(into), start_ns_(thread_cpu_ns()) {}
  ~WorkTimer() { into_ += thread_cpu_ns() - start_ns_; }
  WorkTimer(const WorkTimer&) = delete;
  WorkTimer& operator=(const WorkTimer&) = delete;

 private:
  uint64_t& into_;
  uint64_t start_ns_;
};

uint32_t local_index(LcoreJob& lj, const Chunk& c) noexcept { return static_cast<uint32_t>(&c - &lj.chunk(0)); }

}  // namespace

void JobHandler::arm_capture(const Request& req) noexcept {
  (void)plan;
  WorkTimer timer(io.checkpoint_work_ns);
  CheckpointCapture& cap = *req.capture;
  if (lj.capture != nullptr || req.round != req.capture->round) {
    cap.failed.store(true, std::memory_order_relaxed);  // another capture still holds this lcore
    return;
  }
  // Every chunk armed; whether each is at the boundary, not yet or past it is looked at lazily (by
  // copy_captures, or by the first packet that could change it), so arming costs no scan of the chunks.
  lj.capture = &cap;
  ++io.capturing;
  lj.capture_left = lj.chunk_count();
  lj.capture_cursor = 0;
  std::fill(lj.capture_state.begin(), lj.capture_state.end(), uint8_t{LcoreJob::capture_armed});
  if (lj.capture_left == 0) detach_capture();
}

bool JobHandler::capture_open(uint32_t i) noexcept {
  if (lj.capture_state[i] != LcoreJob::capture_armed) return lj.capture_state[i] == LcoreJob::capture_opened;
  CheckpointCapture& cap = *lj.capture;
  const Chunk& c = lj.chunk(i);
  switch (capture_timing(plan.math, c, cap.round)) {
    case CaptureTiming::later: return false;
    case CaptureTiming::missed:
      cap.failed.store(true, std::memory_order_relaxed);  // the control thread aims at a later round
      detach_capture();
      return false;
    case CaptureTiming::now: break;
  }
  // From here until each segment is copied, no segment changes before its copy: every packet that could
  // change one calls capture_segment first.
  lj.capture_state[i] = LcoreJob::capture_opened;
  cap.steps[io.res.index][i] = step_after(c, cap.round);
  std::fill_n(lj.capture_copied.begin() + static_cast<ptrdiff_t>(i) * lj.capture_words, lj.capture_words, uint64_t{0});
  lj.capture_segs_left[i] = c.segments;
  return true;
}

size_t JobHandler::copy_capture_segment(uint32_t i, uint32_t seg) noexcept {
  uint64_t& word = lj.capture_copied[static_cast<size_t>(i) * lj.capture_words + seg / 64];
  const uint64_t bit = uint64_t{1} << (seg % 64);
  if ((word & bit) != 0) return 0;
  word |= bit;
  CheckpointCapture& cap = *lj.capture;
  const Chunk& c = lj.chunk(i);
  const uint32_t n = segment_elems(plan.math, c, seg);
  copy_state_slice(c, cap, cap.offset[io.res.index][i], segment_offset(plan.math, seg), n);
  if (--lj.capture_segs_left[i] == 0) {
    lj.capture_state[i] = LcoreJob::capture_idle;
    bump(lj.counters.checkpoint_chunks_copied);
    // Release: the control thread reads the copied memory once it has counted every chunk.
    cap.copied.fetch_add(1, std::memory_order_release);
    if (--lj.capture_left == 0) detach_capture();
  }
  return static_cast<size_t>(n) * sizeof(float) * cap.arrays.size();
}

void JobHandler::open_capture(Chunk& c) noexcept {
  const uint32_t i = local_index(lj, c);
  if (lj.capture_state[i] != LcoreJob::capture_armed) return;
  WorkTimer timer(io.checkpoint_work_ns);
  (void)capture_open(i);
}

void JobHandler::capture_segment(Chunk& c, uint32_t seg) noexcept {
  const uint32_t i = local_index(lj, c);
  const uint8_t state = lj.capture_state[i];
  if (state == LcoreJob::capture_idle) return;
  if (state == LcoreJob::capture_opened &&
      (lj.capture_copied[static_cast<size_t>(i) * lj.capture_words + seg / 64] >> (seg % 64) & 1u) != 0) {
    return;
  }
  WorkTimer timer(io.checkpoint_work_ns);
  if (capture_open(i)) (void)copy_capture_segment(i, seg);
}

void Lcore::copy_captures(const Snapshot& s) noexcept {
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    if (s.lcore_jobs[io_.res.index][j]->capture == nullptr) continue;
    WorkTimer timer(io_.checkpoint_work_ns);
    handler(s, j).copy_capture_slice();
  }
}

void JobHandler::copy_capture_slice() noexcept {
  const uint32_t n = lj.chunk_count();
  size_t bytes = 0;
  for (uint32_t looked = 0; looked < kCaptureChunksPerIteration && lj.capture != nullptr &&
                            bytes < kCaptureBytesPerIteration;
       ++looked) {
    const uint32_t i = lj.capture_cursor;
    if (capture_open(i)) {
      const uint32_t segments = lj.chunk(i).segments;
      for (uint32_t seg = 0; seg < segments && bytes < kCaptureBytesPerIteration; ++seg) {
        bytes += copy_capture_segment(i, seg);
        if (lj.capture_state[i] != LcoreJob::capture_opened) break;
      }
      if (lj.capture_state[i] == LcoreJob::capture_opened) break;  // the budget is spent: go on here
    }
    lj.capture_cursor = i + 1 == n ? 0 : i + 1;
  }
}

void JobHandler::detach_capture() noexcept {
  if (lj.capture != nullptr) --io.capturing;
  lj.capture = nullptr;
  lj.capture_left = 0;
  std::fill(lj.capture_state.begin(), lj.capture_state.end(), uint8_t{LcoreJob::capture_idle});
}

void Lcore::account_checkpoint_work() noexcept {
  set_max(io_.counters.max_checkpoint_work_ns, io_.checkpoint_work_ns);
  if (io_.checkpoint_work_ns > kCheckpointWorkBoundNs) bump(io_.counters.checkpoint_work_over_100us);
  io_.checkpoint_work_ns = 0;
}

}  // namespace phub::engine

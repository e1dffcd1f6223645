// Copying a chunk's state into a checkpoint capture, a segment's slice at a time, and installing it back.
#include "phub/engine/checkpoint_capture.hpp"

#include <cstring>

namespace phub::engine {

uint32_t state_arrays(const agg::OptimizerParams& o) noexcept {
  switch (o.kind) {
    case agg::OptimizerKind::sgd: return 1;
    case agg::OptimizerKind::momentum:
    case agg::OptimizerKind::nesterov: return 2;
    case agg::OptimizerKind::adam: return 3;
  }
  return 1;
}

CaptureTiming capture_timing(const JobMath& m, const Chunk& c, uint32_t round) noexcept {
  // `round` complete, its advance not made yet (at finish_round, or deferred for a busy result buffer).
  if (c.round == round && round_complete(c)) return CaptureTiming::now;
  // The round after it has not changed anything yet. In round 0 of an epoch nothing was completed in it:
  // the state is the epoch's start, not the state after some round.
  if (c.round == next_round(m, round) && c.segs_done == 0 && !c.advance_pending && c.initialized &&
      c.round != 0) {
    return CaptureTiming::now;
  }
  if (round_delta(m, round, c.round) >= 0) return CaptureTiming::later;
  return CaptureTiming::missed;
}

// A complete round not advanced yet adds its update to the count, unless it was skipped (updated nothing).
uint64_t step_after(const Chunk& c, uint32_t round) noexcept {
  return c.round == round && c.updated ? c.step + 1 : c.step;
}

void copy_state_slice(const Chunk& c, CheckpointCapture& cap, uint64_t offset, uint32_t first, uint32_t n) noexcept {
  const float* from[3] = {c.weights, c.moment1, c.moment2};
  for (size_t a = 0; a < cap.arrays.size() && a < 3; ++a) {
    std::memcpy(cap.arrays[a].data() + offset + first, from[a] + first, static_cast<size_t>(n) * sizeof(float));
  }
}

void install_chunk_state(const JobMath& m, Chunk& c, uint32_t round, const std::vector<std::vector<float>>& arrays,
                         uint64_t offset, uint64_t step) noexcept {
  float* to[3] = {c.weights, c.moment1, c.moment2};
  for (size_t a = 0; a < arrays.size() && a < 3; ++a) {
    std::memcpy(to[a], arrays[a].data() + offset, static_cast<size_t>(c.elems) * sizeof(float));
  }
  c.step = step;
  c.trained = step > 0;
  c.state_loaded = false;
  c.prev_skipped = false;
  c.initialized = true;
  c.init_segs = c.segments;
  for (uint32_t s = 0; s < c.segments; ++s) c.init_bits[s / 64] |= uint64_t{1} << (s % 64);
  c.round = next_round(m, round);
  c.segs_done = 0;
  c.advance_pending = false;
  c.first_tsc = 0;
  std::memset(c.bits, 0, static_cast<size_t>(c.segments) * m.bitmap_words * sizeof(uint64_t));
  std::memset(c.counts, 0, static_cast<size_t>(c.segments) * sizeof(uint16_t));
  m.kernels->narrow(c.out[c.cur ^ 1], c.weights, m.out_dtype, c.elems);
  c.has_prev = true;
}

}  // namespace phub::engine

// A ps job shard's checkpoint in the making: the owning lcores copy each chunk's weights and optimizer
// state after one round into memory the control thread owns, each chunk at its own round boundary, so no
// lcore ever waits for the whole shard (docs/persistence.md). DPDK-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "phub/engine/chunk.hpp"

namespace phub::engine {

struct CheckpointCapture {
  uint32_t round = 0;   // the state after this round
  uint16_t epoch = 0;   // the epoch the round belongs to
  // The shard's state, one array per kind (weights, then momentum's velocity or Adam's two moments), each
  // holding the chunks this server owns in chunk id order.
  std::vector<std::vector<float>> arrays;
  std::vector<std::vector<uint64_t>> offset;  // [lcore index][local chunk index]: the chunk's first element
  std::vector<std::vector<uint64_t>> steps;   // [lcore index][local chunk index]: its optimizer step
  uint32_t chunks = 0;                        // chunks of the shard
  std::atomic<uint32_t> copied{0};            // chunks copied so far (release: their memory is written)
  std::atomic<bool> failed{false};            // a chunk was past the round, or a new epoch started
};

// Whether a chunk's state after `round` can be copied now, later (the round is still to complete), or
// never (the chunk is past it, or nothing has been completed in this epoch at all).
enum class CaptureTiming : uint8_t { now, later, missed };

[[nodiscard]] CaptureTiming capture_timing(const JobMath& m, const Chunk& c, uint32_t round) noexcept;

// The chunk's optimizer step after `round` (capture_timing() returned now): the updates applied, with the
// completed round's counted though the chunk has not advanced yet.
[[nodiscard]] uint64_t step_after(const Chunk& c, uint32_t round) noexcept;

// Copies elements [first, first + n) of each of the chunk's state arrays (weights, moments) into the
// capture's arrays at element `offset` + first: one segment's slice, copied before the next round changes it.
void copy_state_slice(const Chunk& c, CheckpointCapture& cap, uint64_t offset, uint32_t first, uint32_t n) noexcept;

// The reverse, at start-up (no lcore runs): installs a chunk's state after `round` from `arrays` at element
// `offset` with optimizer step `step`. The chunk is then initialised, holds those weights as the previous
// result (what a pull returns) and waits for round `round` + 1, its first round.
void install_chunk_state(const JobMath& m, Chunk& c, uint32_t round, const std::vector<std::vector<float>>& arrays,
                         uint64_t offset, uint64_t step) noexcept;

// Arrays of state a ps job's optimizer keeps per element: weights, and 1 (momentum, nesterov) or 2 (adam)
// moment arrays.
[[nodiscard]] uint32_t state_arrays(const agg::OptimizerParams& o) noexcept;

}  // namespace phub::engine

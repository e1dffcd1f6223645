// Memory of a job as a formula, known at admission (and checked against real allocation by a test).
#pragma once

#include <cstdint>
#include <string>

#include "phub/engine/chunk.hpp"
#include "phub/proto/layout.hpp"

namespace phub::engine {

// Bytes, by purpose. See docs/memory.md for the formula in words.
struct JobMemory {
  uint64_t accumulators = 0;  // 4 B per element
  uint64_t optimizer = 0;     // ps: weights 4 B, plus 4 B (momentum, nesterov) or 8 B (adam) per element
  uint64_t staging = 0;       // deterministic: workers x element bytes of the pushed dtype
  uint64_t results = 0;       // (2 per chunk + spares) result buffers of result-dtype elements
  uint64_t bookkeeping = 0;   // bitmaps, counters, chunk records, peer tables, mempool headers
  // ps with checkpoints: the control thread's copy of the shard's state while a checkpoint is taken (heap,
  // not the data plane's memory; the weights and moments once more, fp32).
  uint64_t checkpoint_copy = 0;
  // What the lcores allocate for the job (LcoreJob::create).
  [[nodiscard]] uint64_t data_plane() const noexcept { return accumulators + optimizer + staging + results + bookkeeping; }
  // What the job is admitted against: its quota and the server's limits.memory_bytes.
  [[nodiscard]] uint64_t total() const noexcept { return data_plane() + checkpoint_copy; }
  [[nodiscard]] std::string describe() const;
};

// Spare result buffers per lcore for a job whose lcore owns `chunks` chunks.
[[nodiscard]] uint32_t spare_results(uint32_t chunks) noexcept;

// Per-object bytes of the result-buffer mempool for a result of `result_bytes` (header, alignment, and
// the mempool's own per-object overhead).
[[nodiscard]] uint64_t result_object_bytes(uint64_t result_bytes) noexcept;

// Bytes of the ring that holds `spares` free result buffers.
[[nodiscard]] uint64_t spares_ring_bytes(uint32_t spares) noexcept;

// For the `owners` layout owners from `first_owner` on (this server's lcores).
[[nodiscard]] JobMemory estimate_job_memory(const JobMath& m, const proto::Layout& layout, uint16_t first_owner,
                                            uint16_t owners);

}  // namespace phub::engine

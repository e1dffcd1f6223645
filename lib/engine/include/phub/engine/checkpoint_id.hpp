// What a ps job's checkpoint files are of: the job, this server's shard, and a fingerprint of what the
// state depends on, so that a restore takes only a file the running config can use (docs/persistence.md).
#pragma once

#include <cstdint>

#include "phub/engine/job_plan.hpp"
#include "phub/persist/checkpoint.hpp"

namespace phub::engine {

// A hash of the keys, dtype, mode and optimizer (and, for a sharded job, of what decides which chunks
// this server owns: chunk_bytes, shard count and index, lcores). Names, secrets, limits and the checkpoint
// settings themselves do not change it.
[[nodiscard]] uint64_t checkpoint_fingerprint(const JobPlan& plan) noexcept;

[[nodiscard]] persist::CheckpointId checkpoint_id(const JobPlan& plan);

// The key of the job's checkpoint MACs, from its secret (all zero for a job without one).
[[nodiscard]] persist::CheckpointKey checkpoint_key(const JobPlan& plan);

}  // namespace phub::engine

// How much of each resource the lcores share between jobs one job may hold (docs/security.md, "Tenant
// isolation"): a hand-off ring's slots and a transmit buffer's slots, in proportion to the job's workers.
// The shares of all jobs add up to at most the whole, so no job's flood takes a slot another job could use.
#pragma once

#include <cstdint>

namespace phub::engine {

// `capacity` slots, split over jobs by their worker counts: `workers` of the job, `workers_total` of all
// the jobs of the snapshot. At least 1 slot (a job has at least one worker, so this only matters when
// there are more workers than slots).
[[nodiscard]] uint32_t job_share_slots(uint32_t capacity, uint32_t workers, uint64_t workers_total) noexcept;

// The usable slots of a hand-off ring of `ring_entries` (an rte_ring keeps one entry free).
[[nodiscard]] inline uint32_t handoff_ring_slots(uint32_t ring_entries) noexcept { return ring_entries - 1; }

}  // namespace phub::engine

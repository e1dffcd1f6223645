// How much of each resource the lcores share between jobs one job may hold (docs/security.md, "Tenant
// isolation"): a hand-off ring's slots and a transmit buffer's slots, in proportion to the job's workers.
// The hand-off shares of all jobs add up to at most the whole, so no job's flood takes a slot another job
// could use. A transmit buffer is split in two: half is guaranteed to the jobs by their shares, the other
// half is a pool any job may borrow from while it has free slots, one job at most half of the pool (a
// job's burst of results may be far larger than its share, and a flood still leaves every other job its
// guarantee and half of the pool).
#pragma once

#include <cstdint>

namespace phub::engine {

// `capacity` slots, split over jobs by their worker counts: `workers` of the job, `workers_total` of all
// the jobs of the snapshot. At least 1 slot (a job has at least one worker, so this only matters when
// there are more workers than slots).
[[nodiscard]] uint32_t job_share_slots(uint32_t capacity, uint32_t workers, uint64_t workers_total) noexcept;

// The usable slots of a hand-off ring of `ring_entries` (an rte_ring keeps one entry free).
[[nodiscard]] inline uint32_t handoff_ring_slots(uint32_t ring_entries) noexcept { return ring_entries - 1; }

// The transmit slots jobs may borrow beyond their guarantees, of a buffer of `capacity`.
[[nodiscard]] constexpr uint32_t tx_pool_slots(uint32_t capacity) noexcept { return capacity / 2; }
// What one job may borrow of that pool at most.
[[nodiscard]] constexpr uint32_t tx_borrow_limit_slots(uint32_t capacity) noexcept { return tx_pool_slots(capacity) / 2; }
// A job's guaranteed transmit slots: its share of the part of `capacity` that is not the pool.
[[nodiscard]] inline uint32_t tx_guarantee_slots(uint32_t capacity, uint32_t workers, uint64_t workers_total) noexcept {
  return job_share_slots(capacity - tx_pool_slots(capacity), workers, workers_total);
}

// A job's packets waiting in one lcore's transmit buffers, and how many of them are borrowed from the pool.
struct TxHold {
  uint64_t packets = 0;
  uint64_t borrowed = 0;
};

enum class TxAdmit : uint8_t { own, borrowed, refused };

// Whether one more packet of a job holding `hold` may wait: within its `guarantee_slots`, else borrowed
// while the lcore has lent fewer than `pool_slots` (`pool_lent`) and the job fewer than `borrow_limit_slots`.
[[nodiscard]] constexpr TxAdmit admit_tx(const TxHold& hold, uint32_t guarantee_slots, uint64_t pool_lent,
                                         uint32_t pool_slots, uint32_t borrow_limit_slots) noexcept {
  if (hold.packets < guarantee_slots) return TxAdmit::own;
  if (pool_lent < pool_slots && hold.borrowed < borrow_limit_slots) return TxAdmit::borrowed;
  return TxAdmit::refused;
}

}  // namespace phub::engine

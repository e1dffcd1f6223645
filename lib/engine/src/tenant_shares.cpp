// The size of a job's share of the slots the jobs share (see tenant_shares.hpp).
#include "phub/engine/tenant_shares.hpp"

#include <algorithm>

namespace phub::engine {

uint32_t job_share_slots(uint32_t capacity, uint32_t workers, uint64_t workers_total) noexcept {
  if (workers_total == 0) return capacity;
  const uint64_t share = static_cast<uint64_t>(capacity) * workers / workers_total;
  return static_cast<uint32_t>(std::max<uint64_t>(share, 1));
}

}  // namespace phub::engine

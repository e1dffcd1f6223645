// The job memory formula: the same arithmetic LcoreJob::create allocates by.
#include "phub/engine/memory.hpp"

#include <rte_ring.h>

#include "phub/engine/lcore_job.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t round64(uint64_t n) noexcept { return (n + 63) / 64 * 64; }

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

uint32_t spare_results(uint32_t chunks) noexcept { return chunks / 8 + 4; }

uint64_t result_object_bytes(uint64_t result_bytes) noexcept {
  return round64(sizeof(ResultBuf)) + round64(result_bytes);
}

uint64_t spares_ring_bytes(uint32_t spares) noexcept {
  return static_cast<uint64_t>(rte_ring_get_memsize(static_cast<unsigned>(rte_align32pow2(spares + 1))));
}

JobMemory estimate_job_memory(const JobMath& m, const proto::Layout& layout, uint16_t first_owner,
                              uint16_t owners) {
  JobMemory mem;
  const uint64_t result_obj =
      result_object_bytes(static_cast<uint64_t>(layout.params().chunk_elems) * dtype_bytes(m.out_dtype));
  for (uint16_t owner = first_owner; owner < first_owner + owners; ++owner) {
    const auto owned = layout.owned(owner);
    for (uint32_t id : owned) {
      const proto::ChunkInfo& ci = layout.chunk(id);
      const ChunkSizes s = chunk_sizes(m, ci.elems, ci.segments, homed_here(m, id));
      mem.accumulators += s.acc;
      mem.optimizer += s.weights + s.moment1 + s.moment2;
      mem.staging += s.staging;
      mem.staging += s.partials;
      mem.bookkeeping += s.bits + s.counts + s.init_bits + s.done + s.piece_bits + s.piece_counts;
    }
    const auto n = static_cast<uint32_t>(owned.size());
    const uint32_t spares = spare_results(n);
    mem.results += (2ull * n + spares) * result_obj;
    mem.bookkeeping += round64(sizeof(Chunk) * std::max<uint64_t>(n, 1)) + round64(sizeof(Peer) * m.workers) +
                       spares_ring_bytes(spares);
  }
  return mem;
}

std::string JobMemory::describe() const {
  return mib(total()) + " (accumulators " + mib(accumulators) + ", optimizer state " + mib(optimizer) +
         ", deterministic staging " + mib(staging) + ", result buffers " + mib(results) + ", bookkeeping " +
         mib(bookkeeping) + (checkpoint_copy != 0 ? ", checkpoint copy " + mib(checkpoint_copy) : std::string()) + ")";
}

}  // namespace phub::engine

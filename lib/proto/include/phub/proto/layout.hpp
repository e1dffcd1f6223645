// The chunk map of a job: keys split into chunks, chunks owned by lcores, chunks split into segments.
// Server and clients compute it from the same inputs, so it is part of the protocol (no DPDK).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/base/dtype.hpp"
#include "phub/base/expected.hpp"

namespace phub::proto {

struct ChunkInfo {
  uint32_t key = 0;          // index of the key (tensor) in declaration order
  uint64_t key_offset = 0;   // first element of the chunk within its key
  uint32_t elems = 0;        // elements in this chunk (the last chunk of a key may be short)
  uint16_t owner = 0;        // owning lcore index (0..owners-1); UDP port = port_base + owner
  uint32_t local_index = 0;  // position among the chunks of its owner
  uint32_t segments = 0;     // packets per contribution: ceil(elems / segment_elems)
};

struct LayoutParams {
  std::vector<uint64_t> key_elems;  // elements of each key
  uint32_t chunk_elems = 8192;      // elements per chunk (chunk_bytes / 4: the server keeps fp32 state)
  uint16_t owners = 1;              // lcores of the server (times servers, for a sharded PS)
  uint32_t segment_elems = 352;     // elements per packet, see segment_elems(mtu, dtype)
};

class Layout {
 public:
  // Split keys into chunks and assign chunks to owners greedily, largest first, by bytes, ties to the
  // lowest chunk id and the least-loaded, lowest owner. Deterministic for equal inputs.
  [[nodiscard]] static Expected<Layout, std::string> build(const LayoutParams& p);

  [[nodiscard]] const LayoutParams& params() const noexcept { return params_; }
  [[nodiscard]] std::span<const ChunkInfo> chunks() const noexcept { return chunks_; }
  [[nodiscard]] const ChunkInfo& chunk(uint32_t id) const noexcept { return chunks_[id]; }
  [[nodiscard]] uint32_t chunk_count() const noexcept { return static_cast<uint32_t>(chunks_.size()); }
  // First chunk id of each key; chunks of a key are consecutive.
  [[nodiscard]] uint32_t first_chunk(uint32_t key) const noexcept { return key_first_chunk_[key]; }
  [[nodiscard]] uint32_t key_chunk_count(uint32_t key) const noexcept {
    return key_first_chunk_[key + 1] - key_first_chunk_[key];
  }
  // Chunk ids owned by `owner`, in local_index order.
  [[nodiscard]] std::span<const uint32_t> owned(uint16_t owner) const noexcept { return owned_[owner]; }
  // Elements owned by each owner (the balance the greedy assignment achieved).
  [[nodiscard]] uint64_t owner_elems(uint16_t owner) const noexcept { return owner_elems_[owner]; }
  [[nodiscard]] uint64_t total_elems() const noexcept { return total_elems_; }

  // Segment s of a chunk: its first element and element count.
  [[nodiscard]] uint32_t segment_offset(uint32_t s) const noexcept { return s * params_.segment_elems; }
  [[nodiscard]] uint32_t segment_count_elems(const ChunkInfo& c, uint32_t s) const noexcept {
    const uint32_t off = segment_offset(s);
    return off >= c.elems ? 0 : std::min(params_.segment_elems, c.elems - off);
  }

 private:
  LayoutParams params_;
  std::vector<ChunkInfo> chunks_;
  std::vector<uint32_t> key_first_chunk_;
  std::vector<std::vector<uint32_t>> owned_;
  std::vector<uint64_t> owner_elems_;
  uint64_t total_elems_ = 0;
};

}  // namespace phub::proto

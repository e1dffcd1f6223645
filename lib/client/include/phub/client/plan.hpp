// The client's view of a job's chunk map: lib/proto's Layout (the server computes the same one) plus
// where each chunk is sent (server and UDP port) and where its segments sit in the caller's buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "phub/client/error.hpp"
#include "phub/client/options.hpp"
#include "phub/proto/layout.hpp"

namespace phub::client {

// A destination: IPv4 address and UDP port, host order.
struct Endpoint {
  uint32_t ipv4 = 0;
  uint16_t port = 0;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

class Plan {
 public:
  // Owners are servers x lcores: owner o lives on server o / server_lcores, lcore o % server_lcores.
  [[nodiscard]] static Result<Plan> build(const Options& o, std::span<const uint64_t> key_elems);

  [[nodiscard]] const proto::Layout& layout() const noexcept { return layout_; }
  [[nodiscard]] uint32_t chunk_count() const noexcept { return layout_.chunk_count(); }
  [[nodiscard]] uint32_t key_count() const noexcept { return static_cast<uint32_t>(layout_.params().key_elems.size()); }
  [[nodiscard]] uint64_t key_elems(uint32_t key) const noexcept { return layout_.params().key_elems[key]; }
  [[nodiscard]] uint32_t segment_elems() const noexcept { return layout_.params().segment_elems; }
  [[nodiscard]] size_t elem_bytes() const noexcept { return elem_bytes_; }

  [[nodiscard]] const Endpoint& endpoint(uint32_t chunk) const noexcept { return owner_ep_[layout_.chunk(chunk).owner]; }
  [[nodiscard]] std::span<const Endpoint> owner_endpoints() const noexcept { return owner_ep_; }
  [[nodiscard]] uint16_t owner_of(const Endpoint& ep) const noexcept;  // owner_count() if none

  // Segments of the whole job are numbered 0.. in chunk order: the chunk's first one, and the total.
  [[nodiscard]] uint64_t first_segment(uint32_t chunk) const noexcept { return seg_base_[chunk]; }
  [[nodiscard]] uint64_t total_segments() const noexcept { return seg_base_.back(); }
  [[nodiscard]] uint32_t segments(uint32_t chunk) const noexcept { return layout_.chunk(chunk).segments; }
  // Elements of segment s of a chunk, and the byte offset of its first element within the chunk's key.
  [[nodiscard]] uint32_t segment_len(uint32_t chunk, uint32_t s) const noexcept {
    return layout_.segment_count_elems(layout_.chunk(chunk), s);
  }
  [[nodiscard]] size_t key_byte_offset(uint32_t chunk, uint32_t s) const noexcept {
    const auto& c = layout_.chunk(chunk);
    return (c.key_offset + layout_.segment_offset(s)) * elem_bytes_;
  }
  // The element offset of a chunk's first element within its key.
  [[nodiscard]] uint64_t key_elem_offset(uint32_t chunk) const noexcept { return layout_.chunk(chunk).key_offset; }

 private:
  proto::Layout layout_;
  std::vector<Endpoint> owner_ep_;
  std::vector<uint64_t> seg_base_;  // chunk_count + 1 entries
  size_t elem_bytes_ = 4;
};

}  // namespace phub::client

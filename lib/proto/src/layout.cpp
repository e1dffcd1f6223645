// Chunking of keys and greedy byte-balanced assignment of chunks to owners.
#include "phub/proto/layout.hpp"

#include <algorithm>
#include <numeric>
#include <queue>

namespace phub::proto {

Expected<Layout, std::string> Layout::build(const LayoutParams& p) {
  if (p.key_elems.empty()) return unexpected(std::string("layout: no keys"));
  if (p.chunk_elems == 0) return unexpected(std::string("layout: chunk_elems is 0"));
  if (p.owners == 0) return unexpected(std::string("layout: no owners"));
  if (p.segment_elems == 0) return unexpected(std::string("layout: segment_elems is 0 (MTU too small)"));

  Layout l;
  l.params_ = p;
  l.key_first_chunk_.reserve(p.key_elems.size() + 1);
  for (uint32_t k = 0; k < p.key_elems.size(); ++k) {
    if (p.key_elems[k] == 0) return unexpected("layout: key " + std::to_string(k) + " has no elements");
    l.key_first_chunk_.push_back(static_cast<uint32_t>(l.chunks_.size()));
    for (uint64_t off = 0; off < p.key_elems[k]; off += p.chunk_elems) {
      if (l.chunks_.size() >= UINT32_MAX) return unexpected(std::string("layout: more than 2^32 chunks"));
      ChunkInfo c;
      c.key = k;
      c.key_offset = off;
      c.elems = static_cast<uint32_t>(std::min<uint64_t>(p.chunk_elems, p.key_elems[k] - off));
      c.segments = (c.elems + p.segment_elems - 1) / p.segment_elems;
      l.chunks_.push_back(c);
    }
    l.total_elems_ += p.key_elems[k];
  }
  l.key_first_chunk_.push_back(static_cast<uint32_t>(l.chunks_.size()));

  // Largest first; equal sizes keep chunk id order (stable sort).
  std::vector<uint32_t> order(l.chunks_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return l.chunks_[a].elems > l.chunks_[b].elems; });

  // Min-heap of (load, owner): the least-loaded owner, lowest index on ties, takes the next chunk.
  using Load = std::pair<uint64_t, uint16_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> heap;
  for (uint16_t o = 0; o < p.owners; ++o) heap.emplace(0, o);
  l.owned_.assign(p.owners, {});
  l.owner_elems_.assign(p.owners, 0);
  for (uint32_t id : order) {
    auto [load, owner] = heap.top();
    heap.pop();
    l.chunks_[id].owner = owner;
    l.owner_elems_[owner] = load + l.chunks_[id].elems;
    heap.emplace(l.owner_elems_[owner], owner);
  }
  for (uint32_t id = 0; id < l.chunks_.size(); ++id) {
    auto& c = l.chunks_[id];
    c.local_index = static_cast<uint32_t>(l.owned_[c.owner].size());
    l.owned_[c.owner].push_back(id);
  }
  return l;
}

}  // namespace phub::proto

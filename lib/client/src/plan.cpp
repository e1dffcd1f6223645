// Building the client's chunk plan from the options and the registered keys.
#include "phub/client/plan.hpp"

#include "phub/proto/frame.hpp"

namespace phub::client {

Result<Plan> Plan::build(const Options& o, std::span<const uint64_t> key_elems) {
  if (key_elems.empty()) return fail(PHUB_ERR_STATE, "no keys registered");
  const uint32_t owners = owner_count(o);
  if (owners == 0 || owners > UINT16_MAX) return fail(PHUB_ERR_INVALID_ARGUMENT, "servers x server_lcores must be 1..65535");
  proto::LayoutParams lp;
  lp.key_elems.assign(key_elems.begin(), key_elems.end());
  lp.chunk_elems = o.chunk_bytes / 4;  // the server keeps fp32 state: chunks are counted in fp32 elements
  lp.owners = static_cast<uint16_t>(owners);
  lp.segment_elems = proto::job_segment_elems(o.mtu, o.dtype, o.mode == Mode::ps);
  auto layout = proto::Layout::build(lp);
  if (!layout) return fail(PHUB_ERR_INVALID_ARGUMENT, layout.error());

  Plan p;
  p.layout_ = std::move(*layout);
  p.elem_bytes_ = dtype_bytes(o.dtype);
  p.owner_ep_.reserve(owners);
  for (uint32_t owner = 0; owner < owners; ++owner) {
    p.owner_ep_.push_back(Endpoint{o.servers[owner / o.server_lcores],
                                   static_cast<uint16_t>(o.port_base + owner % o.server_lcores)});
  }
  p.seg_base_.reserve(p.layout_.chunk_count() + 1);
  uint64_t total = 0;
  for (const auto& c : p.layout_.chunks()) {
    p.seg_base_.push_back(total);
    total += c.segments;
  }
  p.seg_base_.push_back(total);
  return p;
}

uint16_t Plan::owner_of(const Endpoint& ep) const noexcept {
  for (size_t i = 0; i < owner_ep_.size(); ++i) {
    if (owner_ep_[i] == ep) return static_cast<uint16_t>(i);
  }
  return static_cast<uint16_t>(owner_ep_.size());
}

}  // namespace phub::client

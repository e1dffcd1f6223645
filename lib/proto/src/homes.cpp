// The home map: chunks spread over the hubs by bytes, within each owner lcore (see homes.hpp).
#include "phub/proto/homes.hpp"

#include <algorithm>

namespace phub::proto {

Expected<HomeMap, std::string> HomeMap::build(const Layout& layout, uint16_t hubs) {
  if (hubs == 0) return unexpected(std::string("home map: no hubs"));
  const uint16_t owners = layout.params().owners;
  HomeMap h;
  h.hubs_ = hubs;
  h.home_.assign(layout.chunk_count(), 0);
  h.homed_.assign(hubs, {});
  h.hub_elems_.assign(hubs, 0);
  h.hub_owner_elems_.assign(static_cast<size_t>(owners) * hubs, 0);
  std::vector<uint32_t> order;
  for (uint16_t o = 0; o < owners; ++o) {
    const auto owned = layout.owned(o);
    order.assign(owned.begin(), owned.end());  // chunk id order
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return layout.chunk(a).elems > layout.chunk(b).elems;
    });
    uint64_t* load = &h.hub_owner_elems_[static_cast<size_t>(o) * hubs];
    for (uint32_t id : order) {
      const auto least = static_cast<uint16_t>(std::min_element(load, load + hubs) - load);  // first of equals
      h.home_[id] = least;
      load[least] += layout.chunk(id).elems;
      h.hub_elems_[least] += layout.chunk(id).elems;
    }
  }
  for (uint32_t id = 0; id < layout.chunk_count(); ++id) h.homed_[h.home_[id]].push_back(id);
  return h;
}

}  // namespace phub::proto

// Each lcore's home port: where workers send its chunks when a job has the chunk-to-interface map.
#include "phub/config/interface_map.hpp"

#include "phub/base/ipv4.hpp"

namespace phub::config {

InterfaceMap interface_map(const Config& cfg, const QueueMap& queues) {
  InterfaceMap m;
  std::vector<size_t> homed(cfg.ports.size(), 0);
  m.home_port.reserve(queues.by_lcore.size());
  for (const auto& polled : queues.by_lcore) {
    uint16_t best = 0;
    bool found = false;
    for (const RxQueue& q : polled) {  // sorted by port: the lower port wins a tie
      if (!found || homed[q.port] < homed[best]) best = q.port;
      found = true;
    }
    if (found) ++homed[best];
    m.home_port.push_back(best);
  }
  return m;
}

std::vector<uint64_t> InterfaceMap::per_port(std::span<const uint64_t> per_lcore, size_t ports) const {
  std::vector<uint64_t> out(ports, 0);
  for (size_t l = 0; l < per_lcore.size() && l < home_port.size(); ++l) {
    if (home_port[l] < ports) out[home_port[l]] += per_lcore[l];
  }
  return out;
}

std::string InterfaceMap::describe(const Config& cfg) const {
  std::string s;
  for (size_t l = 0; l < home_port.size() && l < cfg.lcores.size(); ++l) {
    const Port& p = cfg.ports[home_port[l]];
    if (!s.empty()) s += ", ";
    s += "lcore " + std::to_string(cfg.lcores[l].id) + " -> " + p.name + " (" + format_ipv4(p.ipv4.addr) + ")";
  }
  return s;
}

}  // namespace phub::config

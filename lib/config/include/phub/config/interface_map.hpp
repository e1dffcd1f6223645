// The chunk-to-interface map (docs/config.md, "Chunk-to-interface map"): each lcore takes a job's chunks on
// one port of its own, its home, so that with a job's interface_map = true each chunk's owner is an
// (lcore, port) pair and workers send every chunk to that port's address. An lcore's home is, among the
// ports it polls, the one that has the fewest lcores homed there so far (lcore order, the lower port on a
// tie): lcores split per NIC are homed on their NIC, lcores that poll every port are spread over them.
// Pure: from the config and its queue map alone.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/config/config.hpp"
#include "phub/config/queue_map.hpp"

namespace phub::config {

struct InterfaceMap {
  std::vector<uint16_t> home_port;  // by lcore index: the port index it takes its chunks on

  // What a split of elements per lcore (index order) sends to each port: the bytes per port follow it.
  [[nodiscard]] std::vector<uint64_t> per_port(std::span<const uint64_t> per_lcore, size_t ports) const;
  // "lcore 1 -> p0 (198.18.0.1), lcore 2 -> p1 (198.18.1.1)", naming lcores, ports and addresses from `cfg`.
  [[nodiscard]] std::string describe(const Config& cfg) const;
};

// The map of `cfg` given its queue map (every lcore polls at least one port: validation).
[[nodiscard]] InterfaceMap interface_map(const Config& cfg, const QueueMap& queues);

}  // namespace phub::config

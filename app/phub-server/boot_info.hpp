// The part of a config that preparing the machine needs (EAL arguments, port devices), as JSON for tools/phub-boot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/base/numa_sysfs.hpp"
#include "phub/config/config.hpp"
#include "phub/engine/budget.hpp"

namespace phub::server {

// One JSON object (phub/base/json.hpp): {"eal_args": [...], "memory_bytes": N, "memory_sockets": [{"socket": S,
// "bytes": N}, ...], "numa_nodes": [0, 1, ...], "ports": [{"name": ..., "device": ...}, ...]}. eal_args are
// the arguments the server would give the EAL (the config's, or --eal's, plus those after --); memory_bytes
// is the memory budget (phub/engine/budget.hpp) that --check prints, memory_sockets its shares by socket
// (socket -1: the share that may land on any socket), numa_nodes the nodes sysfs lists (`machine`).
[[nodiscard]] std::string boot_info_json(const config::Config& cfg, const std::vector<std::string>& eal_args,
                                         const engine::MemoryBudget& budget, const NumaFacts& machine);

}  // namespace phub::server

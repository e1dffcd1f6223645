// The part of a config that preparing the machine needs (EAL arguments, port devices), as JSON for tools/phub-boot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/config/config.hpp"

namespace phub::server {

// One JSON object (phub/base/json.hpp): {"eal_args": [...], "memory_bytes": N, "ports": [{"name": ...,
// "device": ...}, ...]}. eal_args are the arguments the server would give the EAL (the config's, or --eal's,
// plus those after --); memory_bytes is the memory budget (phub/engine/budget.hpp) that --check prints.
[[nodiscard]] std::string boot_info_json(const config::Config& cfg, const std::vector<std::string>& eal_args,
                                         uint64_t memory_bytes);

}  // namespace phub::server

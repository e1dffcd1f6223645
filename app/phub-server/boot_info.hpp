// The part of a config that preparing the machine needs (EAL arguments, port devices), as JSON for tools/phub-boot.
#pragma once

#include <string>
#include <vector>

#include "phub/config/config.hpp"

namespace phub::server {

// One JSON object (phub/base/json.hpp): {"eal_args": [...], "ports": [{"name": ..., "device": ...}, ...]}.
// eal_args are the arguments the server would give the EAL (the config's, or --eal's, plus those after --).
[[nodiscard]] std::string boot_info_json(const config::Config& cfg, const std::vector<std::string>& eal_args);

}  // namespace phub::server

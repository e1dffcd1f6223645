// What a reload would change: the difference between the running config and a new one, as jobs to add,
// remove, change in place or keep, and the differences a running server cannot take (each naming its
// field and why). Pure: no DPDK, no state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/config/config.hpp"

namespace phub::engine {

struct ConfigDiff {
  std::vector<uint32_t> added;      // job ids only in the new config
  std::vector<uint32_t> removed;    // job ids only in the running config
  std::vector<uint32_t> changed;    // in both, with differences a running job can take (limits, secret, ...)
  std::vector<uint32_t> unchanged;  // in both, equal
  bool settings_changed = false;    // server settings a running server can take (timeouts, memory limit, ...)
  std::vector<std::string> refused;  // "jobs[2].workers: changing workers needs a restart"

  [[nodiscard]] bool ok() const noexcept { return refused.empty(); }
  [[nodiscard]] bool empty() const noexcept { return added.empty() && removed.empty() && changed.empty() && !settings_changed; }
  // "added 1 (c), removed 0, changed 1 (b), unchanged 1"
  [[nodiscard]] std::string describe(const config::Config& next) const;
};

[[nodiscard]] ConfigDiff diff_configs(const config::Config& running, const config::Config& next);

}  // namespace phub::engine

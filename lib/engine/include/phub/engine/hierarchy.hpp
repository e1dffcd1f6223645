// What every hub of a hierarchical job must agree on, as a fingerprint of named components that hubs
// compare at start-up (docs/hierarchy.md). Pure: computed from the config and the job's plan.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phub/config/config.hpp"
#include "phub/engine/job_plan.hpp"

namespace phub::engine {

struct HubFingerprint {
  enum Component : uint8_t { racks, ranks, layout, arithmetic, optimizer, count_ };
  static constexpr size_t kComponents = count_;
  std::array<uint64_t, kComponents> parts{};

  friend bool operator==(const HubFingerprint&, const HubFingerprint&) = default;
};

// The config fields each component covers, for messages ("racks (names, hub addresses, hub ports)").
[[nodiscard]] std::string_view fingerprint_component_name(HubFingerprint::Component c) noexcept;

// The fingerprint of `plan`'s job on a hub running `cfg`. Leaves out what may differ between hubs (this
// hub's rack, port addresses, lcore ids, quotas, limits, sources) and the secret.
[[nodiscard]] HubFingerprint hub_fingerprint(const config::Config& cfg, const JobPlan& plan);

// One line per component that differs, naming it: empty when the hubs agree.
[[nodiscard]] std::vector<std::string> fingerprint_differences(const HubFingerprint& mine,
                                                               const HubFingerprint& theirs);

}  // namespace phub::engine

// What every hub of a hierarchical job must agree on, as a fingerprint of named components that hubs
// compare at start-up (docs/hierarchy.md). Pure: computed from the config and the job's plan.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phub/config/config.hpp"
#include "phub/base/expected.hpp"
#include "phub/engine/job_plan.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/homes.hpp"

namespace phub::engine {

struct HubFingerprint {
  enum Component : uint8_t { racks, ranks, layout, arithmetic, optimizer, count_ };
  static constexpr size_t kComponents = count_;
  std::array<uint64_t, kComponents> parts{};

  friend bool operator==(const HubFingerprint&, const HubFingerprint&) = default;
};

// The config fields each component covers, for messages ("racks (names, hub addresses, hub ports)").
[[nodiscard]] std::string_view fingerprint_component_name(HubFingerprint::Component c) noexcept;
// Its one-word key, for reports and labels: racks, ranks_by_rack, layout, arithmetic, optimizer.
[[nodiscard]] std::string_view fingerprint_component_key(HubFingerprint::Component c) noexcept;

// The fingerprint of `plan`'s job on a hub running `cfg`. Leaves out what may differ between hubs (this
// hub's rack, port addresses, lcore ids, quotas, limits, sources) and the secret.
[[nodiscard]] HubFingerprint hub_fingerprint(const config::Config& cfg, const JobPlan& plan);

// One line per component that differs, naming it: empty when the hubs agree.
[[nodiscard]] std::vector<std::string> fingerprint_differences(const HubFingerprint& mine,
                                                               const HubFingerprint& theirs);

// A job's place in the hierarchy, as this hub sees it (docs/hierarchy.md). Pure: from the config and the plan.
struct HubPlan {
  struct Hub {
    uint32_t ipv4 = 0;        // racks[].hub_ipv4 (host order)
    uint16_t port_base = 0;   // the job's UDP port base at that hub (racks[].hub_port_base, 0: the job's)
    uint16_t port = 0;        // index of this server's port whose subnet holds ipv4 (where forwards to it go)
  };
  uint16_t my_rack = 0;                 // this hub's rack index (position in racks)
  std::vector<Hub> hubs;                // by rack index
  std::vector<uint16_t> rack_of_rank;   // by rank
  std::vector<uint16_t> local_ranks;    // the ranks of this hub's rack, increasing (the summation order)
  proto::HomeMap homes;                 // chunk -> home rack index
  uint32_t piece_elems = 0;             // elements per fwd_partial: segment_elems(mtu, fp32)
  uint16_t pieces_per_segment = 1;      // fwd_partial pieces of one full segment
  proto::AuthKey payload_key;           // fwd_payload_key of the job key
  HubFingerprint fingerprint;
};

// The hierarchy of `plan`'s job on a hub running `cfg` whose ports have the IP MTU `mtu`. Refuses, naming
// the field, a job that cannot be hierarchical: no secret (forwards must be authenticated), or sharded.
// `cfg` has racks (a flat config has no hierarchy to plan). Also refuses a peer hub no port's subnet holds
// (forwards are sent to the hub's own address, never through a router), and a hub_port_base of this
// hub's own rack other than the job's port_base (this hub receives forwards on the job's ports).
[[nodiscard]] Expected<HubPlan, std::string> plan_hierarchy(const config::Config& cfg, const JobPlan& plan,
                                                            uint16_t mtu);

// Makes `plan` hierarchical: plan.hub, the chunk arithmetic's view of it (plan.math), and the memory
// estimate with the home's per-rack staging. Refuses a job the estimate puts over its quota.
[[nodiscard]] Expected<void, std::string> attach_hierarchy(JobPlan& plan, HubPlan hub);

}  // namespace phub::engine

// The outputs of `phub-probe plan`: JSON report, OpenMPI hostfile, rank maps and the phub Lua snippet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"

#include "phub/topo/plan.hpp"

namespace phub::probe {

// What the coordinator adds about the measurement itself (absent for `plan --matrix`).
struct ProbeInfo {
  bool measured = false;
  unsigned samples = 0;
  bool bandwidth = false;
  double wall_s = 0.0;
  std::vector<size_t> unreachable;  // hosts whose agent did not answer the control connection
};

struct PlanInputs {
  const topo::Matrix& matrix;
  const topo::Plan& plan;
  const topo::PlanOptions& options;
  ProbeInfo probe;
};

[[nodiscard]] std::string rack_name(size_t rack);  // "rack1", "rack2", ... in ring order

[[nodiscard]] std::string report_json(const PlanInputs& in);
// "addr slots=1" per rank, in rank order; excluded hosts listed as comments.
[[nodiscard]] std::string openmpi_hostfile(const PlanInputs& in);
// "rank name addr group" per rank.
[[nodiscard]] std::string rank_map(const PlanInputs& in);
// "<name> RANK=r WORLD_SIZE=n LOCAL_RANK=0 ... MASTER_ADDR=<rank 0> MASTER_PORT=<port>" per host.
[[nodiscard]] std::string rank_env(const PlanInputs& in, unsigned master_port);
// racks.lua, `return { racks = {...}, ranks_by_rack = {...} }`: a hub's config reads it with
// `local plan = include("racks.lua")`, then sets `racks = plan.racks` and, in each job of these hosts,
// `ranks_by_rack = plan.ranks_by_rack`.
// Only for a matrix that knows the hubs' addresses (a CSV matrix names hosts only): hubs_have_addresses.
[[nodiscard]] std::string lua_racks(const PlanInputs& in);
// Every rack's hub has an IPv4 address; else the error names the first that has not.
[[nodiscard]] Expected<void, std::string> hubs_have_addresses(const PlanInputs& in);

// A hub config per rack rendered from a template: kRackMark becomes the rack's name and kHubIpv4Mark its
// hub's address, each as a Lua string literal; nothing else changes (line numbers stay the template's).
// A template without kRackMark is refused (every hub would claim the same rack), as is a matrix without the
// hubs' addresses.
inline constexpr const char* kRackMark = "@RACK@";
inline constexpr const char* kHubIpv4Mark = "@HUB_IPV4@";
struct HubConfig {
  std::string file;  // "hub-<rack>.lua"
  std::string text;
};
[[nodiscard]] Expected<std::vector<HubConfig>, std::string> hub_configs(const PlanInputs& in, std::string_view tmpl);

}  // namespace phub::probe

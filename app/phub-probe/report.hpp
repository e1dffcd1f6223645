// The outputs of `phub-probe plan`: JSON report, OpenMPI hostfile, rank maps and the phub Lua snippet.
#pragma once

#include <string>
#include <vector>

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
// `local phub_probe = { racks = {...}, ranks_by_rack = {...} }`: paste above a config's `return`, then
// use `racks = phub_probe.racks` and, in each job of these hosts, `ranks_by_rack = phub_probe.ranks_by_rack`.
[[nodiscard]] std::string lua_racks(const PlanInputs& in);

}  // namespace phub::probe

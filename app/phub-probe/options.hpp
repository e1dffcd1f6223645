// Command-line options of phub-probe: the command (agent, run, plan) and its options.
#pragma once

#include <optional>
#include <string>

#include "coordinator.hpp"
#include "dpdk_transport.hpp"
#include "phub/base/expected.hpp"
#include "phub/topo/plan.hpp"

namespace phub::probe {

// The options of planning and of its outputs, shared by run and plan.
struct PlanArgs {
  topo::PlanOptions po;
  std::string hub_template_file;
};

struct AgentArgs {
  std::string listen, token_file;
  std::optional<std::string> eal_args;  // set by --dpdk, possibly empty
  DpdkAgentOptions dpdk;                // its eal_args is left empty: see eal_args
};

struct RunArgs {
  std::string hosts_file, token_file, out = "phub-probe-out";
  RunOptions run;
  PlanArgs plan;
};

struct PlanCmdArgs {
  std::string matrix_file, out;
  PlanArgs plan;
};

struct ProbeCommand {
  enum class Kind { none, agent, run, plan } kind = Kind::none;  // none: no command given
  bool help = false;
  std::string help_text;  // with help: what --help prints (of the command it was given to)
  AgentArgs agent;
  RunArgs run;
  PlanCmdArgs plan;
};

[[nodiscard]] Expected<ProbeCommand, std::string> parse_command(int argc, char** argv);
// The --help text of phub-probe as a whole.
[[nodiscard]] std::string usage();

}  // namespace phub::probe

// Lua scenarios (`phub-pktgen -f file.lua`) in the spirit of Pktgen-DPDK's Lua API: a script sets the
// run parameters, starts and stops runs, reads their statistics and runs several steps (e.g. an RFC 2544
// binary search for the zero-loss rate). See docs/pktgen.md for the API.
#pragma once

#include <string>
#include <vector>

#include "generator.hpp"
#include "record.hpp"
#include "session.hpp"
#include "settings.hpp"

namespace phub::pktgen {

struct ScenarioResult {
  Record results;                     // pktgen.result(name, value)
  std::vector<std::string> failures;  // pktgen.check/fail
  std::string error;                  // a Lua error that ended the script
};

[[nodiscard]] ScenarioResult run_scenario(const std::string& path, Session& session, const Generator& g,
                                          const RunSettings& defaults);

}  // namespace phub::pktgen

// Writes every output file of a plan into a directory and prints a short summary.
#pragma once

#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "report.hpp"

namespace phub::probe {

inline constexpr unsigned kMasterPort = 29500;

// report.json, heatmap.png, hostfile, rankmap.txt, rankmap.env, racks.lua and matrix.txt in `dir`
// (created if needed), and with a hub config template (its text; empty = none) hub-<rack>.lua for each
// rack (hub_configs). Returns the paths written.
[[nodiscard]] Expected<std::vector<std::string>, std::string> write_outputs(const std::string& dir, const PlanInputs& in,
                                                                          std::string_view hub_template = {});

// Human summary: groups with members and confidence, flagged/excluded hosts, predicted speedups.
[[nodiscard]] std::string summary(const PlanInputs& in);

}  // namespace phub::probe

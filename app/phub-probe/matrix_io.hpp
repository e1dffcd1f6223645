// Matrix files: the native text format written by `phub-probe run`, and a plain CSV of RTTs.
#pragma once

#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/topo/matrix.hpp"

namespace phub::probe {

// Native format, one record per line:
//   phub-probe-matrix 1
//   host <index> <name> <addr> <port>
//   pair <i> <j> <present 0|1> <sent> <received> <min_us> <median_us> <p90_us> <bw_bytes_per_s>
[[nodiscard]] std::string format_matrix(const topo::Matrix& m);

// Native format, or CSV: a header "host,<name>,..." then one row per host "<name>,<rtt_us>,..."
// (empty, "nan" or "-" for a missing pair; the CSV sets min = median = p90).
[[nodiscard]] Expected<topo::Matrix, std::string> parse_matrix(std::string_view text);

}  // namespace phub::probe

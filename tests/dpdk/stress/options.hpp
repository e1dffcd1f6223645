// The stress binary's own arguments: --seed S, --seconds N, --epochs N.
#pragma once

#include <cstdint>
#include <string>

#include "phub/base/expected.hpp"

namespace phub::stress {

struct Options {
  uint64_t seed = 0;       // default: from the clock, printed at start
  double seconds = 60;     // run epochs until this much time has passed...
  uint64_t epochs = 0;     // ...or this many epochs ran (0: no limit)
};

// Parses what gtest left of argv. PHUB_STRESS_SECONDS, when set, overrides --seconds (to change the test
// suite's run length without editing meson.build).
[[nodiscard]] Expected<Options, std::string> parse_options(int argc, char** argv);

// The options of this run (set once by main).
Options& options();

}  // namespace phub::stress

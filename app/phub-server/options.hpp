// Command-line options of phub-server.
#pragma once

#include <string>
#include <vector>

#include "phub/base/expected.hpp"

namespace phub::server {

struct Options {
  std::string config_path;           // empty: the embedded default
  bool check = false;                // validate the config and exit
  bool print_config = false;         // print the config as Lua and exit
  bool print_boot_info = false;      // print the EAL arguments and port devices as JSON and exit
  bool help = false;
  bool eal_args_set = false;         // --eal replaces the config's EAL arguments
  std::vector<std::string> eal_args;
  std::vector<std::string> eal_extra;  // after "--": appended to the EAL arguments
  double duration_s = 0;             // run for this long, then stop (0: until a signal)
  uint32_t stats_interval_ms = 0;    // 0: the config's control.stats_interval_ms
};

[[nodiscard]] Expected<Options, std::string> parse_options(int argc, char** argv);
[[nodiscard]] std::string usage();

}  // namespace phub::server

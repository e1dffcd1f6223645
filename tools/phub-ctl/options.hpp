// Command-line options of phub-ctl.
#pragma once

#include <string>
#include <vector>

#include "phub/base/expected.hpp"

namespace phub::ctl_tool {

struct Options {
  std::string socket_path;         // the server's control socket
  double timeout_s = 0;            // 0: the command's default (default_timeout_s)
  bool help = false;
  std::vector<std::string> words;  // the command and its arguments, as given
};

// Options come before the command; everything from the command on is the command's.
[[nodiscard]] Expected<Options, std::string> parse_options(int argc, char** argv);
[[nodiscard]] std::string usage();
// How long to wait for an answer when --timeout is not given: reload checks a whole config.
[[nodiscard]] double default_timeout_s(const std::vector<std::string>& words);

}  // namespace phub::ctl_tool

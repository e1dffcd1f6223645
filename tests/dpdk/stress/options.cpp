// The stress binary's arguments (see options.hpp).
#include "options.hpp"

#include <chrono>
#include <cstdlib>
#include <string_view>

namespace phub::stress {
namespace {

bool parse_number(std::string_view text, double& out) {
  char* end = nullptr;
  const std::string s(text);
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && out >= 0;
}

}  // namespace

Options& options() {
  static Options o;
  return o;
}

Expected<Options, std::string> parse_options(int argc, char** argv) {
  Options o;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc || (arg != "--seed" && arg != "--seconds" && arg != "--epochs")) {
      return unexpected("usage: test-dpdk-stress [--seed S] [--seconds N] [--epochs N] (unexpected '" +
                        std::string(arg) + "')");
    }
    const std::string value = argv[++i];
    double number = 0;
    if (!parse_number(value, number)) return unexpected(std::string(arg) + ": '" + value + "' is not a number");
    if (arg == "--seed") {
      o.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (arg == "--seconds") {
      o.seconds = number;
    } else {
      o.epochs = static_cast<uint64_t>(number);
    }
  }
  if (const char* env = std::getenv("PHUB_STRESS_SECONDS"); env != nullptr && *env != '\0') {
    double number = 0;
    if (!parse_number(env, number)) return unexpected("PHUB_STRESS_SECONDS: '" + std::string(env) + "' is not a number");
    o.seconds = number;
  }
  return o;
}

}  // namespace phub::stress

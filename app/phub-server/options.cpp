// Command-line parsing of phub-server.
#include "options.hpp"

#include "phub/base/eal_args.hpp"

#include <cstdlib>
#include <sstream>

namespace phub::server {
namespace {

Expected<double, std::string> number(const std::string& flag, const char* text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || v < lo || v > hi) {
    return unexpected(flag + ": '" + text + "' is not a number in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

}  // namespace

std::string usage() {
  return "usage: phub-server [--config FILE] [--check] [--print-config] [--print-boot-info] [--eal \"EAL ARGS\"]\n"
         "                   [--duration SECONDS] [--stats-interval MS] [-- EXTRA EAL ARGS]\n"
         "  --config FILE        Lua config (default: the embedded config/phub.lua)\n"
         "  --check              validate the config, print a summary, exit\n"
         "  --print-config       print the config as Lua with every default filled in, exit\n"
         "  --print-boot-info    print the EAL arguments and port devices as JSON (for phub-boot), exit\n"
         "  --eal \"ARGS\"         replace the config's eal_args\n"
         "  -- ARGS              append ARGS to the EAL arguments\n"
         "  --duration SECONDS   stop after this long (default: run until SIGTERM/SIGINT)\n"
         "  --stats-interval MS  print a stats line this often (default: control.stats_interval_ms)\n"
         "signals: SIGTERM/SIGINT stop cleanly, SIGUSR1 prints every counter\n";
}

Expected<Options, std::string> parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const std::string& flag) -> Expected<const char*, std::string> {
      if (i + 1 >= argc) return unexpected(flag + " needs a value");
      return argv[++i];
    };
    if (a == "--") {
      for (++i; i < argc; ++i) o.eal_extra.emplace_back(argv[i]);
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--print-config") {
      o.print_config = true;
    } else if (a == "--print-boot-info") {
      o.print_boot_info = true;
    } else if (a == "--config" || a == "-c") {
      auto v = value(a);
      if (!v) return unexpected(v.error());
      o.config_path = *v;
    } else if (a == "--eal") {
      auto v = value(a);
      if (!v) return unexpected(v.error());
      o.eal_args_set = true;
      o.eal_args = phub::split_eal_args(*v);
    } else if (a == "--duration") {
      auto v = value(a);
      if (!v) return unexpected(v.error());
      auto d = number(a, *v, 0, 1e7);
      if (!d) return unexpected(d.error());
      o.duration_s = *d;
    } else if (a == "--stats-interval") {
      auto v = value(a);
      if (!v) return unexpected(v.error());
      auto d = number(a, *v, 0, 3.6e6);
      if (!d) return unexpected(d.error());
      o.stats_interval_ms = static_cast<uint32_t>(*d);
    } else {
      return unexpected("unknown argument '" + a + "'");
    }
  }
  return o;
}

}  // namespace phub::server

// Command-line parsing of phub-server (CLI11, through lib/cli).
#include "options.hpp"

#include "phub/base/eal_args.hpp"
#include "phub/cli/cli.hpp"

namespace phub::server {
namespace {

std::unique_ptr<CLI::App> make(Options& o) {
  auto app = cli::make_app(
      "usage: phub-server [--config FILE] [--check] [--print-config] [--print-boot-info] [--eal \"EAL ARGS\"]\n"
      "                   [--duration SECONDS] [--stats-interval MS] [-- EXTRA EAL ARGS]\n",
      "The phub parameter-server appliance: sums the gradient chunks that workers push, over DPDK ports.",
      "  -- ARGS                append ARGS to the EAL arguments\n"
      "signals: SIGTERM/SIGINT stop cleanly, SIGUSR1 prints every counter\n");
  app->add_option("-c,--config", o.config_path, "Lua config (default: the embedded config/phub.lua)")
      ->type_name("FILE");
  app->add_flag("--check", o.check, "validate the config, print a summary, exit");
  app->add_flag("--print-config", o.print_config, "print the config as Lua with every default filled in and every secret redacted, exit");
  app->add_flag("--print-boot-info", o.print_boot_info,
                "print the EAL arguments, the memory budget (in all and by socket), the NUMA nodes and the port "
                "devices as JSON (for phub-boot), exit");
  app->add_option_function<std::string>(
         "--eal",
         [&o](const std::string& args) {
           o.eal_args_set = true;
           o.eal_args = split_eal_args(args);
         },
         "replace the config's eal_args")
      ->type_name("\"ARGS\"");
  app->add_option("--duration", o.duration_s, "stop after this long (default: run until SIGTERM/SIGINT)")
      ->type_name("SECONDS")
      ->check(cli::number_in(0, 1e7));
  app->add_option("--stats-interval", o.stats_interval_ms,
                  "print a stats line this often (default: control.stats_interval_ms)")
      ->type_name("MS")
      ->check(cli::whole_in(0, 3'600'000));
  return app;
}

}  // namespace

std::string usage() { return cli::help_text<Options>(make); }

Expected<Options, std::string> parse_options(int argc, char** argv) {
  cli::Split args = cli::split_at_separator(argc, argv);  // after "--": EAL arguments, as given
  auto o = cli::parse_options<Options>(make, std::move(args.before));
  if (o) o->eal_extra = std::move(args.after);
  return o;
}

}  // namespace phub::server

// Command-line parsing of phub-probe (CLI11, through lib/cli): the three commands and their options.
#include "options.hpp"

#include <limits>

#include "phub/cli/cli.hpp"

namespace phub::probe {
namespace {

constexpr const char* kAgentUsage =
    "usage: phub-probe agent --listen ADDR[:PORT] [--token-file FILE]\n"
    "       phub-probe agent --listen ADDR[:PORT] [--token-file FILE] --dpdk \"EAL ARGS\" --port DEVARGS\n"
    "                        --ipv4 A.B.C.D/N [--gateway A.B.C.D] [--probe-port P] [--idle-sleep-us U]\n";
constexpr const char* kRunUsage =
    "usage: phub-probe run --hosts FILE [--token-file FILE] [--out DIR] [--samples K] [--interval-us U]\n"
    "                      [--timeout-ms T] [--bandwidth] [--bulk-bytes B] [--no-progress] [plan options]\n";
constexpr const char* kPlanUsage = "usage: phub-probe plan --matrix FILE --out DIR [plan options]\n";
constexpr const char* kPlanOptionsUsage =
    "plan options: [--model-bytes B] [--min-separation X] [--default-gbps G] [--hub-config-template FILE]\n";
constexpr const char* kTokenNote =
    "The control channel needs a shared token of 16 to 256 characters: --token-file FILE (mode 0600), else\n"
    "PHUB_PROBE_TOKEN; for run also a \"token = VALUE\" line in the hosts file (after --token-file, before the\n"
    "variable). Agents refuse connections that cannot prove they know it.\n";
constexpr const char* kAgentNote =
    "Agents use UDP ADDR:PORT for probes and TCP ADDR:PORT for control (default port 7700). With --dpdk the\n"
    "probes use the DPDK port's own address (UDP port P, default PORT) and TSC timestamps; control stays on TCP.\n";

// A number > 0.
CLI::Validator positive() { return cli::number_in(0, std::numeric_limits<double>::max(), true); }

void plan_options(CLI::App& app, PlanArgs& pa) {
  const std::string group = "Plan options";
  app.add_option("--model-bytes", pa.po.model_bytes, "allreduce size for the predicted costs")
      ->type_name("B")->check(positive())->capture_default_str()->group(group);
  app.add_option("--min-separation", pa.po.cluster.min_separation,
                 "split into groups only if the next level is this many times further away")
      ->type_name("X")->check(positive())->capture_default_str()->group(group);
  app.add_option_function<double>(
         "--default-gbps", [&pa](double g) { pa.po.default_bw_bytes_per_s = g * 1e9 / 8; },
         "bandwidth where it was not measured (default 10)")
      ->type_name("G")->check(positive())->group(group);
  app.add_option("--hub-config-template", pa.hub_template_file,
                 "write hub-<rack>.lua per rack from FILE: @RACK@ and @HUB_IPV4@ filled in")
      ->type_name("FILE")->group(group);
}

void agent_options(CLI::App& app, AgentArgs& a) {
  app.add_option("--listen", a.listen, "UDP (probes) and TCP (control) address, default port 7700")
      ->type_name("ADDR[:PORT]")->required();
  app.add_option("--token-file", a.token_file, "the control token (mode 0600; else PHUB_PROBE_TOKEN)")
      ->type_name("FILE");
  app.add_option_function<std::string>("--dpdk", [&a](const std::string& eal) { a.eal_args = eal; },
                                       "probe on a DPDK port, the EAL started with these arguments")
      ->type_name("\"EAL ARGS\"");
  app.add_option("--port", a.dpdk.port_devargs, "with --dpdk: the port (any PMD's devargs)")->type_name("DEVARGS");
  app.add_option("--ipv4", a.dpdk.ipv4_cidr, "with --dpdk: the port's own address")->type_name("A.B.C.D/N");
  app.add_option("--gateway", a.dpdk.gateway, "with --dpdk: next hop for peers outside the prefix")
      ->type_name("A.B.C.D");
  app.add_option("--probe-port", a.dpdk.udp_port, "with --dpdk: the UDP port of the probes (default PORT)")
      ->type_name("P")->check(cli::whole_in(1, 65535));
  app.add_option("--idle-sleep-us", a.dpdk.idle_sleep_us, "with --dpdk: sleep slices between empty polls (0: busy-poll)")
      ->type_name("U")->check(cli::whole<unsigned>())->capture_default_str();
}

void run_options(CLI::App& app, RunArgs& r) {
  app.add_option("--hosts", r.hosts_file, "the hosts file: [name] addr[:port] per line")->type_name("FILE")->required();
  app.add_option("--token-file", r.token_file, "the control token (mode 0600)")->type_name("FILE");
  app.add_option("--out", r.out, "where the outputs go")->type_name("DIR")->capture_default_str();
  app.add_option("--samples", r.run.samples, "RTT samples per pair")
      ->type_name("K")->check(cli::whole_in(1, std::numeric_limits<unsigned>::max()))->capture_default_str();
  app.add_option("--interval-us", r.run.interval_us, "pacing between samples")
      ->type_name("U")->check(cli::whole_in(1, std::numeric_limits<unsigned>::max()))->capture_default_str();
  app.add_option_function<double>("--timeout-ms", [&r](double ms) { r.run.timeout_us = static_cast<unsigned>(ms * 1000); },
                                   "per sample (default 50)")
      ->type_name("T")->check(cli::number_in(0, std::numeric_limits<unsigned>::max() / 1000.0, true));
  app.add_flag("--bandwidth", r.run.bandwidth, "also measure bandwidth per pair");
  app.add_option("--bulk-bytes", r.run.bulk_bytes, "bytes per bandwidth transfer")
      ->type_name("B")->check(cli::whole_in(1, std::numeric_limits<uint64_t>::max()))->capture_default_str();
  app.add_flag_callback("--no-progress", [&r] { r.run.progress = false; }, "no live progress line on stderr");
  plan_options(app, r.plan);
}

std::unique_ptr<CLI::App> make(ProbeCommand& c) {
  auto app = cli::make_app(
      "usage:\n"
      "  phub-probe agent --listen ADDR[:PORT] [--token-file FILE]\n"
      "  phub-probe agent --listen ADDR[:PORT] [--token-file FILE] --dpdk \"EAL ARGS\" --port DEVARGS --ipv4 A.B.C.D/N\n"
      "                   [--gateway A.B.C.D] [--probe-port P] [--idle-sleep-us U]\n"
      "  phub-probe run --hosts FILE [--token-file FILE] [--out DIR] [--samples K] [--interval-us U] [--timeout-ms T]\n"
      "                 [--bandwidth] [--bulk-bytes B] [--no-progress] [plan options]\n"
      "  phub-probe plan --matrix FILE --out DIR [plan options]\n" +
          std::string(kPlanOptionsUsage),
                           "Measures the locality of a job's hosts and plans rank orders and a rack grouping.",
                           std::string(kAgentNote) + kTokenNote + "Each command's --help lists its options.\n");
  CLI::App* agent = cli::subcommand(*app, "agent", kAgentUsage, "Answers probes and the coordinator's commands.",
                                    std::string(kAgentNote) + kTokenNote);
  agent_options(*agent, c.agent);
  agent->callback([&c] { c.kind = ProbeCommand::Kind::agent; });
  CLI::App* run = cli::subcommand(*app, "run", std::string(kRunUsage) + kPlanOptionsUsage,
                                  "Probes every pair of hosts through their agents, then plans and writes the outputs.",
                                  kTokenNote);
  run_options(*run, c.run);
  run->callback([&c] { c.kind = ProbeCommand::Kind::run; });
  CLI::App* plan = cli::subcommand(*app, "plan", std::string(kPlanUsage) + kPlanOptionsUsage,
                                   "Plans from a measured matrix (matrix.txt or a CSV) and writes the outputs.");
  plan->add_option("--matrix", c.plan.matrix_file, "the matrix: matrix.txt of a run, or a CSV")
      ->type_name("FILE")->required();
  plan->add_option("--out", c.plan.out, "where the outputs go")->type_name("DIR")->required();
  plan_options(*plan, c.plan.plan);
  plan->callback([&c] { c.kind = ProbeCommand::Kind::plan; });
  app->require_subcommand(0, 1);
  return app;
}

}  // namespace

std::string usage() { return cli::help_text<ProbeCommand>(make); }

Expected<ProbeCommand, std::string> parse_command(int argc, char** argv) {
  ProbeCommand c;
  auto app = make(c);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "help") args[0] = "--help";
  auto parsed = cli::parse(*app, std::move(args));
  if (!parsed) return unexpected(parsed.error());
  c.help = parsed->help;
  c.help_text = parsed->help_text;
  return c;
}

}  // namespace phub::probe

// Parsing phub-pktgen's command line (CLI11, through lib/cli).
#include "options.hpp"

#include <cstdlib>
#include <sstream>
#include <type_traits>

#include "phub/cli/cli.hpp"

namespace phub::pktgen {
namespace {

Expected<double, std::string> number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || v < 0) return unexpected(flag + ": '" + text + "' is not a non-negative number");
  return v;
}

Expected<void, std::string> parse_inject(const std::string& text, RunSettings& s) {
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    const auto f = gen::parse_fault(item.substr(0, eq));
    if (!f) return unexpected("--inject: unknown fault '" + item.substr(0, eq) + "'");
    auto n = number("--inject", eq == std::string::npos ? "1" : item.substr(eq + 1));
    if (!n) return unexpected(n.error());
    s.inject[static_cast<size_t>(*f)] = static_cast<uint64_t>(*n);
  }
  return {};
}

// An option that takes a number: a whole one that fits the field, or any non-negative one for a double.
template <class T>
CLI::Option* number_option(CLI::App& app, const std::string& name, T& field, const std::string& help,
                           const std::string& type = "N") {
  CLI::Option* opt = app.add_option(name, field, help)->type_name(type);
  if constexpr (std::is_floating_point_v<T>) {
    return opt->check(cli::non_negative());
  } else {
    return opt->check(cli::whole<T>());
  }
}

std::unique_ptr<CLI::App> make(Options& o) {
  auto app = cli::make_app(
      "usage: phub-pktgen [EAL args] -- [options]\n",
      "Emulates the workers of phub jobs against a phub-server: real pushes, every result verified.",
      "Exit status: 0 all verified, 2 a mismatch or a run that did not settle or a failed scenario check, 1 an error.\n");
  CLI::App& a = *app;
  const std::string traffic = "Traffic", port = "Port", run = "Run", output = "Output",
                    traces = "Traces (no EAL needed)";
  a.add_option("--server-config", o.server_config, "take jobs, server lcores, address and MTU from the server's Lua config")
      ->type_name("FILE")->group(traffic);
  a.add_option("--job", o.job_texts,
               "a job, as KEY=VALUE pairs joined by commas (id=1,workers=8,keys=1000000+4096); the keys: id workers "
               "keys dtype=fp32|fp16|bf16 mode=allreduce|ps reduce=sum|mean deterministic=0|1 chunk_bytes=N "
               "port_base=N lcores=N secret=S round_modulus=N optimizer=sgd|momentum|nesterov|adam lr=X "
               "momentum=X values=exact|order hparams=0|1 crc=0|1 sessions=0|1 (with a secret: join every server "
               "lcore with the session handshake and seal every packet) payload_mac=0|1 (repeatable)")
      ->type_name("SPEC")->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group(traffic);
  a.add_option("--jobs", o.only_jobs, "emulate only these jobs of the config")
      ->type_name("ID,ID")->delimiter(',')->check(cli::whole<uint32_t>())
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group(traffic);
  number_option(a, "--server-lcores", o.server_lcores, "server lcores for --job without a config (default 1)")
      ->group(traffic);
  a.add_option("--owners", o.owners,
               "drive only these server lcores, by position in the server's lcores list (0-based): the chunks they "
               "own, their joins and hyperparameter sets; the others get nothing of this generator. One generator "
               "per port of a server whose lcores are split per port, each given its port's address (--server-ip)")
      ->type_name("I,J")->delimiter(',')->check(cli::whole<uint16_t>())
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group(traffic);
  a.add_option("--values", o.values,
               "override the value kind (order: only a rank-order sum matches; default for deterministic)")
      ->type_name("exact|order")->check(cli::one_of({"exact", "order"}))->group(traffic);
  a.add_flag("--crc", o.crc, "set the crc flag and the payload CRC32C on pushes")->group(traffic);
  a.add_flag("--hparams", o.hparams,
             "ps jobs: register a hyperparameter set with the job's own optimizer values and name it in every "
             "push, as PSOptimizer does (the results stay the same)")
      ->group(traffic);

  a.add_option("--port", o.port.devargs,
               "the generator's port: net_memif0,role=client,socket=/tmp/x.sock | net_af_packet0,iface=v0 | "
               "net_tap0 | a PCI address ...")
      ->type_name("DEVARGS")->group(port);
  number_option(a, "--queues", o.port.queues,
                "RX and TX queues each (default: one pair per server lcore; with --owners a TX queue per lcore driven and RX "
                "queues up to the highest one driven, as a memif server's port polled by those lcores has them)")
      ->group(port);
  number_option(a, "--mtu", o.mtu, "IP MTU (default: the server config's, else 1500)")->group(port);
  a.add_option("--server-ip", o.server_ip, "the server's address (else learnt by ARP)")->type_name("A.B.C.D")->group(port);
  a.add_option("--server-mac", o.server_mac, "the server's MAC address (else learnt by ARP)")
      ->type_name("XX:XX:XX:XX:XX:XX")->group(port);
  a.add_option("--worker-ip", o.worker_ip, "the first worker address")->type_name("A.B.C.D")->group(port);
  number_option(a, "--mbufs", o.port.mbufs, "mbufs per pool")->capture_default_str()->group(port);
  number_option(a, "--idle-sleep-us", o.port.idle_sleep_us, "back off when idle, for shared CPUs (0: busy-poll)")
      ->group(port);
  number_option(a, "--link-timeout", o.link_timeout_s, "wait this long for the link to come up", "S")
      ->capture_default_str()->group(port);
  number_option(a, "--frame-cache-mb", o.port.frame_cache_mb,
                "pre-build the pushes of jobs with a round_modulus within N MiB (default 0: never; measured slower "
                "than recycled frames, whose few frames stay in the cache)")
      ->group(port);
  number_option(a, "--recycle-frames", o.port.recycle_depth,
                "where payloads are copied (--tx-copy, net_memif), send whole-segment pushes from N reused frames "
                "per payload pattern and rank, only their headers rewritten (0: build every push)")
      ->capture_default_str()->group(port);
  a.add_flag("--tx-copy", o.port.tx_copy, "one-segment frames, payload copied (the default on net_memif)")->group(port);
  a.add_flag("--tx-chain", o.port.tx_chain, "header chained to the payload template (zero copy; the default elsewhere)")
      ->group(port);

  a.add_option_function<std::string>(
       "--mode", [&o](const std::string& m) { o.run.mode = m == "open" ? gen::LoopMode::open : gen::LoopMode::closed; },
       "closed: each worker waits for its results; open: a fixed push rate (default closed)")
      ->type_name("closed|open")->check(cli::one_of({"closed", "open"}))->group(run);
  number_option(a, "--rate", o.run.rate_pps, "open loop push rate over all lcores (0: as fast as the link takes)",
                "PPS")->group(run);
  number_option(a, "--duration", o.run.duration_s, "run this long (0 with --rounds: until the rounds are done)", "S")
      ->capture_default_str()->group(run);
  number_option(a, "--rounds", o.run.rounds, "closed loop: rounds per worker, then stop")->group(run);
  number_option(a, "--window", o.run.window, "closed loop: unanswered pushes per worker")->capture_default_str()
      ->group(run);
  number_option(a, "--rto-ms", o.run.rto_ms, "first retransmit timeout", "X")->capture_default_str()->group(run);
  number_option(a, "--loss", o.run.loss, "drop this fraction of own pushes (below 1)", "F")->group(run);
  number_option(a, "--dup", o.run.dup, "duplicate this fraction of own pushes (below 1)", "F")->group(run);
  a.add_flag("--reorder", o.run.reorder, "push segments in random order")->group(run);
  a.add_option_function<std::string>(
       "--inject",
       [&o](const std::string& text) {
         if (auto r = parse_inject(text, o.run); !r) throw CLI::ValidationError(r.error());
       },
       "bad packets: bad_tag foreign_rank unknown_job truncated lying_length bad_dtype huge_count bad_opcode "
       "wrong_opcode future_round")
      ->type_name("KIND=N,...")->group(run);
  number_option(a, "--inject-job", o.run.inject_job, "the job the bad packets imitate (0: the first job)", "ID")
      ->group(run);
  number_option(a, "--drain-ms", o.run.drain_ms, "open loop: stop waiting for results after this long without one",
                "X")->capture_default_str()->group(run);
  number_option(a, "--settle-s", o.run.settle_s, "deadline for finishing the last round after a run (0: do not settle)",
                "X")->capture_default_str()->group(run);
  number_option(a, "--progress-ms", o.run.progress_ms, "live progress line period (0: none)")->capture_default_str()
      ->group(run);
  number_option(a, "--seed", o.run.seed, "random seed")->capture_default_str()->group(run);
  a.add_option("-f", o.scenario, "run a Lua scenario (see docs/pktgen.md)")->type_name("FILE")->group(run);

  a.add_flag("--json", o.json, "print the summary as JSON on stdout (progress stays on stderr)")->group(output);
  a.add_option("--json-file", o.json_file, "also write it there")->type_name("PATH")->group(output);
  a.add_flag("--quiet", o.quiet, "no progress line")->group(output);
  number_option(a, "--linger", o.linger_s,
                "after the run, keep the port open until SIGTERM or S seconds (prints \"pktgen: done\"); an "
                "unanswered ARP then does not restart the port: exit status 75", "S")
      ->group(output);

  a.add_flag("--hold", o.hold,
             "once the link is up and the server's MAC known (prints \"pktgen: ready\"), wait for SIGUSR1 before the "
             "run, so that a harness starts several generators' runs together; SIGTERM then ends it without a run")
      ->group(run);

  a.add_option("--write-pcap", o.write_pcap, "K complete rounds of every job as a classic microsecond pcap")
      ->type_name("FILE")->group(traces);
  number_option(a, "--pcap-rounds", o.pcap_rounds, "the rounds K of --write-pcap", "K")
      ->check(cli::whole_in(1, UINT32_MAX))->capture_default_str()->group(traces);
  a.add_option("--verify-pcap", o.verify_pcap,
               "check the results a server recorded (net_pcap tx_pcap) against the expected values")
      ->type_name("FILE")->group(traces);
  return app;
}

}  // namespace

std::string usage() { return cli::help_text<Options>(make); }

Expected<Options, std::string> parse_options(int argc, char** argv) {
  // [EAL args] -- [options]; without "--", every argument is the generator's.
  cli::Split args = cli::split_at_separator(argc, argv);
  auto o = cli::parse_options<Options>(make, args.separated ? std::move(args.after) : std::move(args.before));
  if (!o) return o;
  if (args.separated) o->eal_args = std::move(args.before);
  if (o->run.loss >= 1 || o->run.dup >= 1) return unexpected(std::string("--loss and --dup are fractions below 1"));
  return o;
}

}  // namespace phub::pktgen

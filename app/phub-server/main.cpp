// phub-server: load the Lua config, start the EAL, run the aggregation data plane until SIGTERM/SIGINT.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "boot_info.hpp"
#include "notify.hpp"
#include "options.hpp"
#include "phub/base/crash_report.hpp"
#include "phub/base/numa_sysfs.hpp"
#include "phub/config/load.hpp"
#include "phub/config/machine_sockets.hpp"
#include "phub/config/numa_placement.hpp"
#include "phub/config/queue_map.hpp"
#include "phub/ctl/counter_cache.hpp"
#include "phub/ctl/prometheus.hpp"
#include "phub/ctl/server.hpp"
#include "phub/ctl/server_control.hpp"
#include "phub/ctl/telemetry.hpp"
#include "phub/drivers/eal.hpp"
#include "phub/engine/budget.hpp"
#include "phub/engine/engine.hpp"
#include "stats_line.hpp"

namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_dump{false};

void on_signal(int sig) {
  if (sig == SIGUSR1) {
    g_dump.store(true);
  } else {
    g_signal.store(sig);
  }
}

void say(const std::string& line) {
  std::printf("phub: %s\n", line.c_str());
  std::fflush(stdout);
}

int fail(const std::string& what) {
  std::fprintf(stderr, "phub-server: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  phub::install_crash_report("phub-server");
  auto opts = phub::server::parse_options(argc, argv);
  if (!opts) return fail(opts.error() + " (see --help)");
  if (opts->help) {
    std::fputs(phub::server::usage().c_str(), stdout);
    return 0;
  }

  auto cfg = opts->config_path.empty()
                 ? phub::config::load_string(phub::config::embedded_default(), "phub.lua (embedded default)")
                 : phub::config::load_file(opts->config_path);
  if (!cfg) return fail("config refused: " + cfg.error());
  if (opts->print_config && !opts->check) {
    std::fputs(phub::config::dump_lua(*cfg, phub::config::Secrets::redacted).c_str(), stdout);
    return 0;
  }

  std::vector<std::string> eal = opts->eal_args_set ? opts->eal_args : cfg->eal_args;
  for (const auto& a : opts->eal_extra) eal.push_back(a);
  // The memory budget, before the EAL takes any, on each socket as the engine will place it (the sockets from
  // sysfs): a config that cannot fit its reservation is refused here, with both numbers, and by --check.
  const phub::NumaFacts machine = phub::read_numa_facts("/sys", phub::config::port_pci_addresses(*cfg));
  auto sockets = phub::config::machine_sockets(*cfg, eal, machine);
  if (!sockets) return fail("config refused: " + sockets.error());
  auto placement = phub::config::place_memory(*cfg, phub::config::queue_map(*cfg), sockets->lcore_sockets,
                                              sockets->port_sockets);
  if (!placement) return fail("config refused: " + placement.error());
  auto reservation = phub::engine::reservation_from_eal_args(eal, machine.free_hugepages);
  if (!reservation) return fail("config refused: " + reservation.error());
  auto budget = phub::engine::memory_budget(*cfg, *placement, reservation->page_bytes);
  if (!budget) return fail("config refused: " + budget.error());
  if (opts->print_boot_info) {  // what the machine needs: hugepages (the budget, jobs included), NICs
    std::fputs(phub::server::boot_info_json(*cfg, eal, *budget, machine).c_str(), stdout);
    return 0;
  }
  const std::string refusal = phub::engine::budget_refusal(*budget, *reservation);
  if (opts->check) {
    // A reservation the EAL arguments do not fix is phub-boot's to make, after --check: reported, not refused.
    if (!refusal.empty() && reservation->fixed) return fail("config refused: " + refusal);
    constexpr const char* kShort = ", short of it: phub-boot reserves the budget before the server starts";
    say("config ok: " + phub::config::describe(*cfg));
    say("memory: needs " + budget->describe() + "; the EAL will have " + reservation->describe() +
        (budget->total_bytes() > reservation->bytes ? kShort : ""));
    for (const auto& share : budget->sockets) {
      const auto have = reservation->on_socket(share.socket);
      const bool short_here = share.socket != phub::config::kAnySocket && have && share.total_bytes() > *have;
      say("memory: " + phub::engine::describe_socket_share(share, *reservation) + (short_here ? kShort : ""));
    }
    say(sockets->describe(*cfg));
    return 0;
  }
  if (!refusal.empty()) return fail("config refused: " + refusal);
  auto eal_owner = phub::drivers::Eal::start("phub-server", eal);
  if (!eal_owner) return fail(eal_owner.error());

  int rc = 0;
  {
    auto engine = phub::engine::Engine::create(*cfg);
    if (!engine) return fail(engine.error());
    for (const auto& line : (*engine)->startup_lines()) say(line);

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGUSR1, on_signal);
    std::signal(SIGHUP, on_signal);
    std::signal(SIGPIPE, SIG_IGN);  // a control client that goes away is the socket's business

    // What phub-ctl, telemetry and Prometheus report: one sample, taken every control.metrics_interval_ms.
    phub::ctl::CounterCache counters;
    counters.refresh(**engine);
    phub::ctl::register_telemetry(&counters);
    std::unique_ptr<phub::ctl::MetricsEndpoint> metrics;
    if (!cfg->control.metrics_address.empty()) {
      auto m = phub::ctl::MetricsEndpoint::open(cfg->control.metrics_address, counters);
      if (!m) return fail(m.error());
      metrics = std::move(*m);
      say("metrics: http://" + cfg->control.metrics_address.substr(0, cfg->control.metrics_address.rfind(':')) + ":" +
          std::to_string(metrics->port()) + "/metrics");
    }
    phub::server::Notifier notifier;
    phub::ctl::ServerControl control(**engine, counters, opts->config_path,
                                     [&](bool starting, const std::string& status) {
                                       starting ? notifier.reloading(status) : notifier.reloaded(status);
                                     },
                                     // A drain may outlast WatchdogSec (timeouts.drain_ms): the pings go on.
                                     [&] { notifier.watchdog(std::chrono::steady_clock::now()); });
    // A checkpoint of a large state waits for its copy and writes for seconds on this thread: the pings go on.
    (*engine)->set_heartbeat([&] { notifier.watchdog(std::chrono::steady_clock::now()); });
    auto socket = phub::ctl::ControlServer::open(cfg->control.socket_path, control);
    if (!socket) return fail("control.socket_path: " + socket.error());
    say("control socket: " + (*socket)->path());

    if (eal_owner->realtime()) {
      say("real-time: " + phub::describe(*eal_owner->realtime()) +
          " (inherited) for the control thread and every lcore; the EAL's own threads run SCHED_OTHER");
    }
    if (auto started = (*engine)->start(eal_owner->realtime()); !started) {
      rc = fail(started.error());
    } else {
      say("ready");
      notifier.ready("aggregating: " + std::to_string(cfg->jobs.size()) + " job(s) on " +
                     std::to_string(cfg->lcores.size()) + " lcore(s), " + std::to_string(cfg->ports.size()) +
                     " port(s)");
      phub::server::StatsLine stats(**engine);
      const auto t0 = std::chrono::steady_clock::now();
      // The intervals are read from the running config at every turn (a reload may change them) and
      // counted from the last sample or stats line: a shorter one takes effect at once.
      auto last_stats = t0;
      std::chrono::steady_clock::time_point last_sample{};  // long ago: the first turn takes a sample
      while (g_signal.load() == 0 || g_signal.load() == SIGHUP) {
        if (g_signal.load() == SIGHUP) {
          g_signal.store(0);
          // The outcome, one log line per line (a refusal lists its reasons below its first line).
          const std::string outcome = control.reload_start_file().body;
          for (size_t at = 0, end = 0; at < outcome.size(); at = end + 1) {
            end = std::min(outcome.find('\n', at), outcome.size());
            if (end > at) say(outcome.substr(at, end - at));
          }
        }
        // The control loop: control clients (it waits here, at most 20 ms), counters, housekeeping.
        (*socket)->poll_once(std::chrono::milliseconds(20));
        const auto now = std::chrono::steady_clock::now();
        notifier.watchdog(now);
        const auto& running = (*engine)->config();
        if (now - last_sample >= std::chrono::milliseconds(running.control.metrics_interval_ms)) {
          counters.refresh(**engine);
          for (const auto& line : (*engine)->hub_events()) say(line);  // peer hubs: fingerprint, reachability
          last_sample = now;
        }
        (*engine)->collect_retired();
        for (const auto& line : (*engine)->checkpoint_due()) say(line);  // checkpoint.every_rounds / every_s
        if (g_dump.exchange(false)) {
          std::fputs((*engine)->format_counters().c_str(), stdout);
          std::fflush(stdout);  // under systemd stdout is a socket to the journal, fully buffered
        }
        const uint32_t interval_ms = opts->stats_interval_ms ? opts->stats_interval_ms : running.control.stats_interval_ms;
        if (interval_ms != 0 && now - last_stats >= std::chrono::milliseconds(interval_ms)) {
          say(stats.next());
          last_stats = now;
        }
        if (opts->duration_s > 0 && now - t0 >= std::chrono::duration<double>(opts->duration_s)) break;
      }
      const std::string stopping =
          g_signal.load() != 0 ? std::string("stopping on ") + strsignal(g_signal.load()) : "stopping: duration over";
      notifier.stopping(stopping);
      say(stopping);
      (*engine)->set_heartbeat({});  // the notifier goes before the engine
      (*engine)->stop();
      say(stats.next());
      std::fputs((*engine)->format_counters().c_str(), stdout);
      std::fflush(stdout);
    }
  }
  return rc;
}

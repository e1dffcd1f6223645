// phub-pktgen: a DPDK packet generator that emulates the workers of phub jobs, verifies every result,
// and measures goodput, loss and round latency; Lua-scriptable; writes replayable pcap traces.
#include <algorithm>
#include <chrono>
#include <thread>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <vector>

#include "phub/base/crash_report.hpp"
#include "generator.hpp"
#include "options.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"
#include "phub/drivers/eal.hpp"
#include "scenario.hpp"
#include "session.hpp"
#include "trace.hpp"

namespace {

using namespace phub::pktgen;

void on_signal(int) { g_interrupted.store(true); }

std::atomic<bool> g_go{false};  // --hold: SIGUSR1 came
void on_go(int) { g_go.store(true); }

int fail(const std::string& what) {
  std::fprintf(stderr, "phub-pktgen: %s\n", what.c_str());
  return 1;
}

phub::Expected<Target, std::string> build_target(const Options& o) {
  Target t;
  if (!o.server_config.empty()) {
    auto c = target_from_config(o.server_config);
    if (!c) return phub::unexpected(c.error());
    t = std::move(*c);
    if (!o.job_texts.empty()) t.jobs.clear();
  } else {
    t.server_lcores = std::max<uint16_t>(o.server_lcores, 1);
  }
  if (o.server_lcores != 0) t.server_lcores = o.server_lcores;
  for (const auto& text : o.job_texts) {
    auto s = parse_job(text, t.server_lcores);
    if (!s) return phub::unexpected(s.error());
    t.jobs.push_back(TargetJob{std::move(*s), {}, 0, 0});
  }
  if (!o.only_jobs.empty()) {
    std::erase_if(t.jobs, [&](const TargetJob& j) {
      return std::find(o.only_jobs.begin(), o.only_jobs.end(), j.spec.id) == o.only_jobs.end();
    });
  }
  if (t.jobs.empty()) return phub::unexpected(std::string("no jobs: give --server-config or --job (see --help)"));
  if (o.mtu != 0) t.mtu = o.mtu;
  if (!o.server_ip.empty()) {
    auto ip = phub::parse_ipv4_address(o.server_ip);
    if (!ip) return phub::unexpected("--server-ip: " + ip.error());
    t.server_ip = *ip;
  }
  if (!o.server_mac.empty()) {
    auto mac = phub::parse_mac_address(o.server_mac);
    if (!mac) return phub::unexpected("--server-mac: " + mac.error());
    t.server_mac = *mac;
  }
  for (auto& j : t.jobs) {
    j.spec.server_lcores = t.server_lcores;
    if (o.values == "order") j.spec.values = phub::gen::Values::order_sensitive;
    if (o.values == "exact") j.spec.values = phub::gen::Values::exact;
    j.spec.crc = j.spec.crc || o.crc;
    if (j.spec.crc && j.spec.sessions) {
      return phub::unexpected("--crc: job " + std::to_string(j.spec.id) + " runs sessions, whose packets carry no CRC "
                              "(its payload_mac protects the payload)");
    }
    j.spec.hparams = j.spec.hparams || (o.hparams && j.spec.mode == phub::gen::Mode::ps);
  }
  auto owners = driven_owners(o.owners, t.server_lcores);
  if (!owners) return phub::unexpected(owners.error());
  t.owners = std::move(*owners);
  if (!o.values.empty() && o.values != "order" && o.values != "exact") {
    return phub::unexpected("--values: '" + o.values + "' is not exact|order");
  }
  return t;
}

// Exit status when the server's MAC could not be learnt although the link came up (see arp.cpp): a harness
// may start the pair again.
constexpr int kExitArpUnanswered = 75;

// With --linger: keep the port open (lcores stopped) until SIGTERM/SIGINT or the time is up, so that a
// harness can stop the server first; a memif peer that disconnects under a polling server can crash it.
void linger(double seconds) {
  if (seconds <= 0) return;
  g_interrupted.store(false);  // before saying so: a SIGTERM that answers the line must not be lost
  std::fprintf(stderr, "pktgen: done\n");
  std::fflush(stderr);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!g_interrupted.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Prints `rec` as JSON on stdout (with --json) and to --json-file.
void emit_json(const Options& o, const Record& rec) {
  const std::string text = rec.to_json();
  if (o.json) std::fputs(text.c_str(), stdout);
  if (!o.json_file.empty()) std::ofstream(o.json_file) << text;
}

int offline(const Options& o, const Target& t) {
  uint32_t worker_ip = 0;
  if (!o.worker_ip.empty()) {
    auto ip = phub::parse_ipv4_address(o.worker_ip);
    if (!ip) return fail("--worker-ip: " + ip.error());
    worker_ip = *ip;
  }
  auto rec = o.write_pcap.empty() ? verify_trace(t, o.verify_pcap)
                                  : write_trace(t, TraceOptions{o.write_pcap, o.pcap_rounds, worker_ip});
  if (!rec) return fail(rec.error());
  emit_json(o, *rec);
  if (!o.json) std::fputs(rec->to_json().c_str(), stderr);
  return rec->number("mismatches") != 0 ? 2 : 0;
}

int online(const Options& o, const Target& t, const std::optional<phub::RealtimePolicy>& realtime) {
  GenConfig gc;
  gc.realtime = realtime;
  gc.port = o.port;
  gc.target = t;
  if (!o.worker_ip.empty()) {
    auto ip = phub::parse_ipv4_address(o.worker_ip);
    if (!ip) return fail("--worker-ip: " + ip.error());
    gc.worker_ip = *ip;
  }
  if (o.port.devargs.empty()) return fail("--port is required (e.g. net_memif0,role=client,socket=/tmp/phub.sock)");
  if (t.server_ip == 0) return fail("no server address: give --server-ip or --server-config");
  auto g = Generator::create(gc);
  if (!g) return fail(g.error());
  for (const auto& line : (*g)->startup_lines()) std::fprintf(stderr, "pktgen: %s\n", line.c_str());
  if (auto r = (*g)->resolve(o.link_timeout_s, o.linger_s <= 0); !r) {
    std::fprintf(stderr, "phub-pktgen: %s\n", r.error().c_str());
    linger(o.linger_s);  // the harness stops the server before this port goes away
    return (*g)->arp_unanswered() ? kExitArpUnanswered : 1;
  }
  std::fprintf(stderr, "pktgen: ready\n");
  if (o.hold) {
    std::fflush(stderr);
    while (!g_go.load() && !g_interrupted.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!g_go.load()) {
      std::fprintf(stderr, "phub-pktgen: stopped while holding for SIGUSR1 (--hold): no run\n");
      linger(o.linger_s);
      return 1;
    }
  }

  Session session(**g, !o.quiet);
  ScenarioResult sr;
  if (!o.scenario.empty()) {
    sr = run_scenario(o.scenario, session, **g, o.run);
  } else if (auto r = session.run(o.run); !r) {
    sr.error = r.error();
  }
  (*g)->shutdown();

  Record out;
  auto steps = list();
  for (const auto& s : session.steps()) {
    steps->push(std::make_shared<Record>(s));
    std::fputs(human_summary(s).c_str(), o.json ? stderr : stdout);
  }
  out.set("steps", steps);
  out.set("results", std::make_shared<Record>(sr.results));
  auto failures = list();
  for (const auto& f : sr.failures) failures->push(f);
  out.set("failures", failures);
  auto examples = list();
  for (const auto& l : (*g)->lcores()) {
    for (size_t j = 0; j < l->partitions().size(); ++j) {
      for (const auto& m : l->partitions()[j]->verifier().mismatches()) {
        examples->push(m.describe((*g)->jobs()[j].wl.spec().id));
        std::fprintf(stderr, "pktgen: MISMATCH %s\n", m.describe((*g)->jobs()[j].wl.spec().id).c_str());
      }
    }
  }
  out.set("mismatch_examples", examples);
  if (!sr.error.empty()) out.set("error", sr.error);
  const bool ok = sr.error.empty() && sr.failures.empty() && !session.verification_failed();
  out.set("ok", ok);
  emit_json(o, out);
  if (!sr.error.empty()) std::fprintf(stderr, "phub-pktgen: %s\n", sr.error.c_str());
  linger(o.linger_s);
  return !sr.error.empty() && sr.failures.empty() ? 1 : ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  phub::install_crash_report("phub-pktgen");
  auto opts = parse_options(argc, argv);
  if (!opts) return fail(opts.error() + " (see --help)");
  if (opts->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  auto target = build_target(*opts);
  if (!target) return fail(target.error());
  if (!opts->write_pcap.empty() || !opts->verify_pcap.empty()) {
    if (!opts->owners.empty()) {
      return fail("--owners drives some lcores of a live server; a trace (--write-pcap, --verify-pcap) holds every "
                  "lcore's packets");
    }
    if (opts->hold) return fail("--hold waits to start a run on a live link; a trace (--write-pcap, --verify-pcap) has none");
    return offline(*opts, *target);
  }

  auto eal = phub::drivers::Eal::start("phub-pktgen", opts->eal_args);
  if (!eal) return fail(eal.error());
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGUSR1, on_go);  // --hold; before "pktgen: ready", which is when a harness may send it
  return online(*opts, *target, eal->realtime());  // the generator's ports and pools are closed before the EAL is cleaned up
}

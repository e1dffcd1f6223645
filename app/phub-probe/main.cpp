// phub-probe: locality probe agent, coordinator (run) and planner (plan). Argument parsing and wiring only.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent.hpp"
#include "coordinator.hpp"
#include "dpdk_transport.hpp"
#include "hosts_file.hpp"
#include "matrix_io.hpp"
#include "outputs.hpp"

namespace {

using namespace phub::probe;

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

constexpr const char* kUsage =
    "usage:\n"
    "  phub-probe agent --listen ADDR[:PORT]\n"
    "  phub-probe agent --listen ADDR[:PORT] --dpdk \"EAL ARGS\" --port DEVARGS --ipv4 A.B.C.D/N\n"
    "                   [--gateway A.B.C.D] [--probe-port P] [--idle-sleep-us U]\n"
    "  phub-probe run --hosts FILE [--out DIR] [--samples K] [--interval-us U] [--timeout-ms T]\n"
    "                 [--bandwidth] [--bulk-bytes B] [--no-progress] [plan options]\n"
    "  phub-probe plan --matrix FILE --out DIR [plan options]\n"
    "plan options: [--model-bytes B] [--min-separation X] [--default-gbps G]\n"
    "Agents use UDP ADDR:PORT for probes and TCP ADDR:PORT for control (default port 7700). With --dpdk the\n"
    "probes use the DPDK port's own address (UDP port P, default PORT) and TSC timestamps; control stays on TCP.\n";

struct Args {
  std::vector<std::string_view> v;
  size_t i = 0;
  [[nodiscard]] bool more() const { return i < v.size(); }
  std::string_view next() { return v[i++]; }
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "phub-probe: %s\n", msg.c_str());
  std::exit(2);
}

double number(Args& a, std::string_view flag) {
  if (!a.more()) die(std::string(flag) + " needs a value");
  const std::string s(a.next());
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(v > 0)) die(std::string(flag) + ": bad value \"" + s + "\"");
  return v;
}

// A whole number >= 0.
unsigned long whole(Args& a, std::string_view flag) {
  if (!a.more()) die(std::string(flag) + " needs a value");
  const std::string s(a.next());
  char* end = nullptr;
  const unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || s[0] == '-' || *end != '\0') die(std::string(flag) + ": bad value \"" + s + "\"");
  return v;
}

std::string text(Args& a, std::string_view flag) {
  if (!a.more()) die(std::string(flag) + " needs a value");
  return std::string(a.next());
}

bool plan_option(Args& a, std::string_view f, phub::topo::PlanOptions& p) {
  if (f == "--model-bytes") p.model_bytes = number(a, f);
  else if (f == "--min-separation") p.cluster.min_separation = number(a, f);
  else if (f == "--default-gbps") p.default_bw_bytes_per_s = number(a, f) * 1e9 / 8;
  else return false;
  return true;
}

int plan_and_write(const phub::topo::Matrix& m, const phub::topo::PlanOptions& po, const ProbeInfo& info,
                   const std::string& out) {
  const phub::topo::Plan plan = phub::topo::plan(m, po);
  const PlanInputs in{m, plan, po, info};
  std::fputs(summary(in).c_str(), stdout);
  auto files = write_outputs(out, in);
  if (!files) die(files.error());
  for (const auto& f : *files) std::printf("wrote %s\n", f.c_str());
  return 0;
}

int cmd_agent(Args& a) {
  std::string listen;
  std::optional<std::string> eal_args;  // set by --dpdk, possibly empty
  DpdkAgentOptions d;
  while (a.more()) {
    const std::string_view f = a.next();
    if (f == "--listen") listen = text(a, f);
    else if (f == "--dpdk") eal_args = text(a, f);
    else if (f == "--port") d.port_devargs = text(a, f);
    else if (f == "--ipv4") d.ipv4_cidr = text(a, f);
    else if (f == "--gateway") d.gateway = text(a, f);
    else if (f == "--probe-port") d.udp_port = static_cast<uint16_t>(number(a, f));
    else if (f == "--idle-sleep-us") d.idle_sleep_us = static_cast<unsigned>(whole(a, f));
    else die("agent: unknown option " + std::string(f));
  }
  if (listen.empty()) die("agent: --listen ADDR[:PORT] is required");
  const bool dpdk = eal_args.has_value();
  d.eal_args = eal_args.value_or("");
  auto host = parse_endpoint(listen);
  if (!host) die(host.error());
  if (!dpdk && (!d.port_devargs.empty() || !d.ipv4_cidr.empty())) die("agent: --port and --ipv4 go with --dpdk");
  if (dpdk && d.udp_port == 0) d.udp_port = host->port;
  if (dpdk && d.ipv4_cidr.empty()) die("agent: --dpdk needs --ipv4 A.B.C.D/N (the port's own address)");
  auto transport = dpdk ? make_dpdk_transport(d) : make_kernel_udp(*host);
  if (!transport) {
    std::fprintf(stderr, "phub-probe agent: %s\n", transport.error().c_str());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  return run_agent(*host, **transport, g_stop);
}

int cmd_run(Args& a) {
  std::string hosts_file, out = "phub-probe-out";
  RunOptions ro;
  phub::topo::PlanOptions po;
  while (a.more()) {
    const std::string_view f = a.next();
    if (f == "--hosts") hosts_file = text(a, f);
    else if (f == "--out") out = text(a, f);
    else if (f == "--samples") ro.samples = static_cast<unsigned>(number(a, f));
    else if (f == "--interval-us") ro.interval_us = static_cast<unsigned>(number(a, f));
    else if (f == "--timeout-ms") ro.timeout_us = static_cast<unsigned>(number(a, f) * 1000);
    else if (f == "--bulk-bytes") ro.bulk_bytes = static_cast<uint64_t>(number(a, f));
    else if (f == "--bandwidth") ro.bandwidth = true;
    else if (f == "--no-progress") ro.progress = false;
    else if (!plan_option(a, f, po)) die("run: unknown option " + std::string(f));
  }
  if (hosts_file.empty()) die("run: --hosts FILE is required");
  auto txt = read_text_file(hosts_file);
  if (!txt) die(txt.error());
  auto hosts = parse_hosts(*txt);
  if (!hosts) die(hosts_file + ": " + hosts.error());
  std::signal(SIGPIPE, SIG_IGN);
  auto meas = measure(*hosts, ro);
  if (!meas) die(meas.error());
  std::printf("probed %zu hosts, %zu pairs, in %.2f s (%zu unreachable)\n", hosts->size(),
              hosts->size() * (hosts->size() - 1) / 2, meas->info.wall_s, meas->info.unreachable.size());
  return plan_and_write(meas->matrix, po, meas->info, out);
}

int cmd_plan(Args& a) {
  std::string matrix_file, out;
  phub::topo::PlanOptions po;
  while (a.more()) {
    const std::string_view f = a.next();
    if (f == "--matrix") matrix_file = text(a, f);
    else if (f == "--out") out = text(a, f);
    else if (!plan_option(a, f, po)) die("plan: unknown option " + std::string(f));
  }
  if (matrix_file.empty() || out.empty()) die("plan: --matrix FILE and --out DIR are required");
  auto txt = read_text_file(matrix_file);
  if (!txt) die(txt.error());
  auto m = parse_matrix(*txt);
  if (!m) die(matrix_file + ": " + m.error());
  return plan_and_write(*m, po, {}, out);
}

}  // namespace

int main(int argc, char** argv) {
  Args a{std::vector<std::string_view>(argv + 1, argv + argc)};
  if (!a.more()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view cmd = a.next();
  if (cmd == "agent") return cmd_agent(a);
  if (cmd == "run") return cmd_run(a);
  if (cmd == "plan") return cmd_plan(a);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fputs(kUsage, stderr);
  return 2;
}

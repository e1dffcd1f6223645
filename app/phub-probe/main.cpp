// phub-probe: locality probe agent, coordinator (run) and planner (plan). Argument parsing and wiring only.
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent.hpp"
#include "auth.hpp"
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
    "  phub-probe agent --listen ADDR[:PORT] [--token-file FILE]\n"
    "  phub-probe agent --listen ADDR[:PORT] [--token-file FILE] --dpdk \"EAL ARGS\" --port DEVARGS --ipv4 A.B.C.D/N\n"
    "                   [--gateway A.B.C.D] [--probe-port P] [--idle-sleep-us U]\n"
    "  phub-probe run --hosts FILE [--token-file FILE] [--out DIR] [--samples K] [--interval-us U] [--timeout-ms T]\n"
    "                 [--bandwidth] [--bulk-bytes B] [--no-progress] [plan options]\n"
    "  phub-probe plan --matrix FILE --out DIR [plan options]\n"
    "plan options: [--model-bytes B] [--min-separation X] [--default-gbps G]\n"
    "              [--hub-config-template FILE] (writes hub-<rack>.lua per rack: @RACK@ and @HUB_IPV4@ filled in)\n"
    "Agents use UDP ADDR:PORT for probes and TCP ADDR:PORT for control (default port 7700). With --dpdk the\n"
    "probes use the DPDK port's own address (UDP port P, default PORT) and TSC timestamps; control stays on TCP.\n"
    "The control channel needs a shared token of 16 to 256 characters: --token-file FILE (mode 0600), else\n"
    "PHUB_PROBE_TOKEN; for run also a \"token = VALUE\" line in the hosts file (after --token-file, before the\n"
    "variable). Agents refuse connections that cannot prove they know it.\n";

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

// The options of planning and of its outputs, shared by run and plan.
struct PlanArgs {
  phub::topo::PlanOptions po;
  std::string hub_template_file;
};

bool plan_option(Args& a, std::string_view f, PlanArgs& pa) {
  phub::topo::PlanOptions& p = pa.po;
  if (f == "--hub-config-template") pa.hub_template_file = text(a, f);
  else if (f == "--model-bytes") p.model_bytes = number(a, f);
  else if (f == "--min-separation") p.cluster.min_separation = number(a, f);
  else if (f == "--default-gbps") p.default_bw_bytes_per_s = number(a, f) * 1e9 / 8;
  else return false;
  return true;
}

int plan_and_write(const phub::topo::Matrix& m, const PlanArgs& pa, const ProbeInfo& info, const std::string& out) {
  std::string hub_template;
  if (!pa.hub_template_file.empty()) {
    auto t = read_text_file(pa.hub_template_file);
    if (!t) die(t.error());
    if (t->empty()) die(pa.hub_template_file + ": the hub config template is empty");
    hub_template = std::move(*t);
  }
  const phub::topo::Plan plan = phub::topo::plan(m, pa.po);
  const PlanInputs in{m, plan, pa.po, info};
  std::fputs(summary(in).c_str(), stdout);
  auto files = write_outputs(out, in, hub_template);
  if (!files) die(files.error());
  for (const auto& f : *files) std::printf("wrote %s\n", f.c_str());
  return 0;
}

// The token from --token-file, else the hosts file's line, else PHUB_PROBE_TOKEN (which is then unset).
std::string token_from(const std::string& token_file, const std::string& hosts_file_token) {
  if (!token_file.empty()) {
    auto t = read_token_file(token_file);
    if (!t) die(t.error());
    return *t;
  }
  if (!hosts_file_token.empty()) return hosts_file_token;
  const char* env = std::getenv(kTokenEnv);
  if (env == nullptr) return {};
  auto t = check_token(env, kTokenEnv);
  if (!t) die(t.error());
  ::unsetenv(kTokenEnv);
  return *t;
}

int cmd_agent(Args& a) {
  std::string listen, token_file;
  std::optional<std::string> eal_args;  // set by --dpdk, possibly empty
  DpdkAgentOptions d;
  while (a.more()) {
    const std::string_view f = a.next();
    if (f == "--listen") listen = text(a, f);
    else if (f == "--token-file") token_file = text(a, f);
    else if (f == "--dpdk") eal_args = text(a, f);
    else if (f == "--port") d.port_devargs = text(a, f);
    else if (f == "--ipv4") d.ipv4_cidr = text(a, f);
    else if (f == "--gateway") d.gateway = text(a, f);
    else if (f == "--probe-port") d.udp_port = static_cast<uint16_t>(number(a, f));
    else if (f == "--idle-sleep-us") d.idle_sleep_us = static_cast<unsigned>(whole(a, f));
    else die("agent: unknown option " + std::string(f));
  }
  if (listen.empty()) die("agent: --listen ADDR[:PORT] is required");
  const std::string token = token_from(token_file, {});
  if (token.empty()) die(std::string("agent: a token is required: --token-file FILE or ") + kTokenEnv);
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
  return run_agent(*host, **transport, token, g_stop);
}

int cmd_run(Args& a) {
  std::string hosts_file, token_file, out = "phub-probe-out";
  RunOptions ro;
  PlanArgs po;
  while (a.more()) {
    const std::string_view f = a.next();
    if (f == "--hosts") hosts_file = text(a, f);
    else if (f == "--token-file") token_file = text(a, f);
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
  auto parsed = parse_hosts_file(*txt);
  if (!parsed) die(hosts_file + ": " + parsed.error());
  const std::vector<phub::topo::Host>* hosts = &parsed->hosts;
  if (struct stat st{}; !parsed->token.empty() && ::stat(hosts_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    std::fprintf(stderr, "phub-probe: warning: %s holds the token and is readable by others (chmod 600 it)\n",
                 hosts_file.c_str());
  ro.token = token_from(token_file, parsed->token);
  if (auto ok = check_run_options(ro); !ok) die("run: " + ok.error());
  std::signal(SIGPIPE, SIG_IGN);
  auto meas = measure(*hosts, ro);
  if (!meas) die(meas.error());
  std::printf("probed %zu hosts, %zu pairs, in %.2f s (%zu unreachable)\n", hosts->size(),
              hosts->size() * (hosts->size() - 1) / 2, meas->info.wall_s, meas->info.unreachable.size());
  return plan_and_write(meas->matrix, po, meas->info, out);
}

int cmd_plan(Args& a) {
  std::string matrix_file, out;
  PlanArgs po;
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

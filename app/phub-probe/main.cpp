// phub-probe: locality probe agent, coordinator (run) and planner (plan). Wiring only (options.cpp parses).
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent.hpp"
#include "auth.hpp"
#include "coordinator.hpp"
#include "dpdk_transport.hpp"
#include "hosts_file.hpp"
#include "matrix_io.hpp"
#include "options.hpp"
#include "outputs.hpp"

namespace {

using namespace phub::probe;

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "phub-probe: %s\n", msg.c_str());
  std::exit(2);
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

int cmd_agent(AgentArgs& a) {
  const std::string& listen = a.listen;
  DpdkAgentOptions& d = a.dpdk;
  const std::string token = token_from(a.token_file, {});
  if (token.empty()) die(std::string("agent: a token is required: --token-file FILE or ") + kTokenEnv);
  const bool dpdk = a.eal_args.has_value();
  d.eal_args = a.eal_args.value_or("");
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

int cmd_run(RunArgs& a) {
  const std::string& hosts_file = a.hosts_file;
  RunOptions& ro = a.run;
  auto txt = read_text_file(hosts_file);
  if (!txt) die(txt.error());
  auto parsed = parse_hosts_file(*txt);
  if (!parsed) die(hosts_file + ": " + parsed.error());
  const std::vector<phub::topo::Host>* hosts = &parsed->hosts;
  if (struct stat st{}; !parsed->token.empty() && ::stat(hosts_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    std::fprintf(stderr, "phub-probe: warning: %s holds the token and is readable by others (chmod 600 it)\n",
                 hosts_file.c_str());
  ro.token = token_from(a.token_file, parsed->token);
  if (auto ok = check_run_options(ro); !ok) die("run: " + ok.error());
  std::signal(SIGPIPE, SIG_IGN);
  auto meas = measure(*hosts, ro);
  if (!meas) die(meas.error());
  std::printf("probed %zu hosts, %zu pairs, in %.2f s (%zu unreachable)\n", hosts->size(),
              hosts->size() * (hosts->size() - 1) / 2, meas->info.wall_s, meas->info.unreachable.size());
  return plan_and_write(meas->matrix, a.plan, meas->info, a.out);
}

int cmd_plan(PlanCmdArgs& a) {
  const std::string& matrix_file = a.matrix_file;
  auto txt = read_text_file(matrix_file);
  if (!txt) die(txt.error());
  auto m = parse_matrix(*txt);
  if (!m) die(matrix_file + ": " + m.error());
  return plan_and_write(*m, a.plan, {}, a.out);
}

}  // namespace

int main(int argc, char** argv) {
  auto cmd = parse_command(argc, argv);
  if (!cmd) die(cmd.error() + " (see --help)");
  if (cmd->help) {
    std::fputs(cmd->help_text.c_str(), stdout);
    return 0;
  }
  switch (cmd->kind) {
    case ProbeCommand::Kind::agent: return cmd_agent(cmd->agent);
    case ProbeCommand::Kind::run: return cmd_run(cmd->run);
    case ProbeCommand::Kind::plan: return cmd_plan(cmd->plan);
    case ProbeCommand::Kind::none: break;
  }
  std::fputs(usage().c_str(), stderr);
  return 2;
}

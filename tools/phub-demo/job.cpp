// Parsing phub-demo-worker's arguments and turning a job of a phub config into client settings.
#include "job.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"

namespace phub::demo {
namespace {

// Stores a flag's value; false if it does not parse.
bool assign(std::string* t, const char* v) {
  *t = v;
  return true;
}
bool assign(std::optional<std::string>* t, const char* v) {
  *t = v;
  return true;
}
bool assign(bool* t, const char*) {
  *t = true;
  return true;
}
bool assign(double* t, const char* v) {
  char* end = nullptr;
  *t = std::strtod(v, &end);
  return end != v && *end == '\0' && *t > 0;
}
template <class T>
bool assign(T* t, const char* v) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  *t = static_cast<T>(n);
  return end != v && *end == '\0' && n <= std::numeric_limits<T>::max();
}

agg::OptimizerParams map_optimizer(const config::Optimizer& o) {
  // config::OptimizerKind and agg::OptimizerKind list the same optimizers in the same order.
  constexpr agg::OptimizerKind kKinds[] = {agg::OptimizerKind::sgd, agg::OptimizerKind::momentum,
                                           agg::OptimizerKind::nesterov, agg::OptimizerKind::adam};
  return agg::OptimizerParams{.kind = kKinds[static_cast<size_t>(o.kind)], .lr = o.lr, .momentum = o.momentum,
                              .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay,
                              .adamw = o.adamw};
}

}  // namespace

std::string usage() {
  return "usage: phub-demo-worker --job NAME|ID --rank R (--rounds N | --seconds S) [--config FILE]\n"
         "  [--server IP[,IP]] [--secret-file FILE] [--timeout-ms N] [--window PACKETS] [--delay-target-us N] [--rto-min-us N] [--bind IP] [--bind-port N] [--sync]\n"
         "  [--drop-ppm N] [--rx-drop-ppm N] [--dup-ppm N] [--reorder-ppm N] [--seed N] [--no-gso] [--no-gro] [--crc]\n"
         "  [--fresh-weights] [--round-times FILE] [--one-address]\n"
         "Plays one rank of a job of the phub config (default: the embedded config/phub.lua), verifies every\n"
         "result element against values computed independently, and prints one summary line.\n"
         "--seconds works in allreduce mode (the ranks agree on when to stop through the results). Rank 0 restarts\n"
         "the job (a new epoch); in ps mode the server keeps the weights of an earlier run unless rank 0 says\n"
         "--fresh-weights (results are verified from this run's own initial weights, so a rerun needs it).\n"
         "The job's secret is the config's, unless --secret-file names a file that holds another (one trailing\n"
         "newline is not part of it) or PHUB_SECRET is set: a secret is never an argument, which ps would show.\n"
         "--round-times writes one line per allreduce round: its start and end, CLOCK_MONOTONIC nanoseconds.\n"
         "--one-address sends every chunk to the server address given, even where the job's interface_map names\n"
         "another port of the server (summary: moved= counts the server lcores whose chunks went elsewhere).\n"
         "--help prints this text.\n";
}

Expected<Args, std::string> parse_args(int argc, char** argv) {
  Args a;
  using Target = std::variant<std::string*, std::optional<std::string>*, double*, int*, uint32_t*, uint64_t*, bool*>;
  const std::pair<std::string_view, Target> flags[] = {
      {"--config", &a.config_path}, {"--job", &a.job}, {"--server", &a.server}, {"--secret-file", &a.secret_file},
      {"--bind", &a.bind}, {"--bind-port", &a.bind_port}, {"--seconds", &a.seconds}, {"--rank", &a.rank}, {"--rounds", &a.rounds},
      {"--timeout-ms", &a.timeout_ms}, {"--window", &a.window}, {"--delay-target-us", &a.delay_target_us}, {"--rto-min-us", &a.rto_min_us},
      {"--drop-ppm", &a.drop_ppm}, {"--rx-drop-ppm", &a.rx_drop_ppm}, {"--dup-ppm", &a.dup_ppm},
      {"--reorder-ppm", &a.reorder_ppm}, {"--seed", &a.seed}, {"--no-gso", &a.no_gso}, {"--no-gro", &a.no_gro},
      {"--crc", &a.crc}, {"--sync", &a.sync}, {"--fresh-weights", &a.fresh_weights}, {"--round-times", &a.round_times},
      {"--one-address", &a.one_address},
      {"--help", &a.help},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    const auto* f = std::find_if(std::begin(flags), std::end(flags), [&](const auto& x) { return x.first == flag; });
    if (f == std::end(flags)) return unexpected("unknown argument '" + std::string(flag) + "'\n" + usage());
    const char* v = std::holds_alternative<bool*>(f->second) ? "" : (i + 1 < argc ? argv[++i] : nullptr);
    const bool ok = v != nullptr && std::visit([&](auto* target) { return assign(target, v); }, f->second);
    if (!ok) return unexpected("bad or missing value for " + std::string(flag) + "\n" + usage());
  }
  if (a.help) return a;
  if (!a.secret_file.empty()) {
    std::ifstream in(a.secret_file, std::ios::binary);
    if (!in.is_open()) return unexpected("--secret-file " + a.secret_file + ": " + std::strerror(errno) + "\n");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return unexpected("--secret-file " + a.secret_file + ": cannot read it\n");
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.empty()) return unexpected("--secret-file " + a.secret_file + ": the file is empty\n");
    a.secret = std::move(text);
  } else if (const char* env = std::getenv("PHUB_SECRET"); env != nullptr && *env != '\0') {
    a.secret = std::string(env);
  }
  if (a.job.empty() || a.rank < 0) return unexpected("--job and --rank are required\n" + usage());
  if ((a.rounds == 0) == (a.seconds == 0)) return unexpected("give exactly one of --rounds and --seconds\n" + usage());
  if (a.bind_port > 65535) return unexpected("--bind-port must be a UDP port, 0..65535\n" + usage());
  return a;
}

Expected<DemoJob, std::string> load_job(const Args& a) {
  auto cfg = a.config_path.empty() ? config::load_string(config::embedded_default(), "phub.lua")
                                   : config::load_file(a.config_path);
  if (!cfg) return unexpected("config: " + cfg.error());
  DemoJob d;
  bool found = false;
  for (const auto& j : cfg->jobs) {
    if (j.name == a.job || std::to_string(j.id) == a.job) {
      d.job = j;
      found = true;
    }
  }
  if (!found) return unexpected("config has no job named '" + a.job + "'");
  if (cfg->ports.empty() || cfg->lcores.empty()) return unexpected("config has no port or no lcore");
  d.servers = a.server.empty() ? format_ipv4(cfg->ports[0].ipv4.addr) : a.server;
  d.lcores = static_cast<uint16_t>(cfg->lcores.size());
  d.mtu = cfg->ports[0].mtu;
  d.optimizer = map_optimizer(d.job.optimizer);
  if (d.job.mode == config::JobMode::allreduce && a.rounds == 0 && a.seconds == 0) return unexpected("no rounds");
  if (d.job.mode == config::JobMode::ps && a.seconds != 0) {
    return unexpected("--seconds needs an allreduce job (ps results are weights: use --rounds)");
  }
  if (d.job.mode == config::JobMode::ps && !a.round_times.empty()) return unexpected("--round-times needs an allreduce job");
  if (static_cast<uint32_t>(a.rank) >= d.job.workers) {
    return unexpected("rank " + std::to_string(a.rank) + " is outside the job's " + std::to_string(d.job.workers) + " workers");
  }
  return d;
}

phub_config client_config(const DemoJob& j, const Args& a) {
  phub_config c;
  phub_config_init(&c);
  c.servers = j.servers.c_str();
  c.port_base = j.job.port_base;
  c.server_lcores = j.lcores;
  c.job_id = j.job.id;
  c.rank = static_cast<uint16_t>(a.rank);
  c.workers = j.job.workers;
  c.secret = a.secret ? a.secret->c_str() : j.job.secret.c_str();
  c.chunk_bytes = j.job.chunk_bytes;
  c.mtu = j.mtu;
  c.mode = j.job.mode == config::JobMode::ps ? PHUB_MODE_PS : PHUB_MODE_ALLREDUCE;
  c.dtype = static_cast<phub_dtype>(j.job.dtype);
  c.reduce = j.job.reduce == config::Reduce::mean ? PHUB_REDUCE_MEAN : PHUB_REDUCE_SUM;
  c.round_modulus = j.job.round_modulus;
  c.timeout_ms = a.timeout_ms;
  if (a.window != 0) c.window_packets = a.window;
  if (a.delay_target_us >= 0) c.delay_target_us = static_cast<uint32_t>(a.delay_target_us);
  if (a.rto_min_us != 0) {
    c.rto_min_us = a.rto_min_us;
    c.rto_initial_us = std::max(c.rto_initial_us, a.rto_min_us);
    c.rto_max_us = std::max(c.rto_max_us, a.rto_min_us);
  }
  c.bind_address = a.bind.empty() ? nullptr : a.bind.c_str();
  c.bind_port = static_cast<uint16_t>(a.bind_port);
  c.flags = (a.no_gso ? PHUB_FLAG_NO_GSO : 0u) | (a.no_gro ? PHUB_FLAG_NO_GRO : 0u) | (a.crc ? PHUB_FLAG_CRC : 0u) |
            (a.fresh_weights ? PHUB_FLAG_FRESH_WEIGHTS : 0u) | (a.one_address ? PHUB_FLAG_ONE_ADDRESS : 0u);
  c.fault_drop_tx_ppm = a.drop_ppm;
  c.fault_drop_rx_ppm = a.rx_drop_ppm;
  c.fault_dup_tx_ppm = a.dup_ppm;
  c.fault_reorder_tx_ppm = a.reorder_ppm;
  c.fault_seed = a.seed != 0 ? a.seed : 1 + static_cast<uint64_t>(a.rank);
  return c;
}

}  // namespace phub::demo

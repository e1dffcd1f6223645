// Reading the server's config (or --job text) into generator job specs.
#include "target.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"

namespace phub::pktgen {
namespace {

agg::OptimizerParams optimizer_of(const config::Optimizer& o) {
  static constexpr agg::OptimizerKind kKinds[] = {agg::OptimizerKind::sgd, agg::OptimizerKind::momentum,
                                                  agg::OptimizerKind::nesterov, agg::OptimizerKind::adam};
  return agg::OptimizerParams{kKinds[static_cast<size_t>(o.kind)], o.lr, o.momentum, o.beta1, o.beta2, o.eps,
                              o.weight_decay, o.adamw, 1, 1.0F};
}

Expected<double, std::string> number(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') return unexpected("job " + key + ": '" + v + "' is not a number");
  return d;
}

}  // namespace

Expected<std::vector<uint16_t>, std::string> driven_owners(const std::vector<uint16_t>& given,
                                                           uint16_t server_lcores) {
  std::vector<uint16_t> out;
  if (given.empty()) {
    for (uint16_t o = 0; o < server_lcores; ++o) out.push_back(o);
    return out;
  }
  for (uint16_t o : given) {
    if (o >= server_lcores) {
      return unexpected("--owners: " + std::to_string(o) + " is not one of the server's lcores: it has " +
                        std::to_string(server_lcores) + " (positions 0.." + std::to_string(server_lcores - 1) +
                        " of its lcores list)");
    }
    if (std::find(out.begin(), out.end(), o) != out.end()) {
      return unexpected("--owners: server lcore " + std::to_string(o) + " is given twice");
    }
    out.push_back(o);
  }
  return out;
}

uint32_t first_worker_ip(const TargetJob& j, uint32_t next, bool worker_ip_given) {
  if (worker_ip_given || j.source_prefix == 0) return next;
  const uint32_t mask = ipv4_netmask(j.source_prefix);
  return (next & mask) == (j.source_net & mask) ? next : (j.source_net & mask) + 100;
}

Expected<Target, std::string> target_from_config(const std::string& path) {
  auto cfg = config::load_file(path);
  if (!cfg) return unexpected("server config refused: " + cfg.error());
  Target t;
  t.server_lcores = static_cast<uint16_t>(cfg->lcores.size());
  if (cfg->ports.empty()) return unexpected(path + ": no ports");
  t.server_ip = cfg->ports[0].ipv4.addr;
  t.server_mac = cfg->ports[0].mac;
  t.mtu = cfg->ports[0].mtu;
  for (const auto& p : cfg->ports) t.mtu = std::min(t.mtu, p.mtu);
  for (const auto& j : cfg->jobs) {
    TargetJob tj;
    gen::JobSpec& s = tj.spec;
    s.id = j.id;
    s.name = j.name;
    s.mode = j.mode == config::JobMode::ps ? gen::Mode::ps : gen::Mode::allreduce;
    s.mean = j.reduce == config::Reduce::mean;
    s.deterministic = j.deterministic;
    s.dtype = j.dtype;
    s.workers = j.workers;
    for (const auto& k : j.keys) s.key_elems.push_back(k.elems);
    s.chunk_bytes = j.chunk_bytes;
    s.server_lcores = t.server_lcores;
    s.port_base = j.port_base;
    s.round_modulus = j.round_modulus;
    s.secret = j.secret;
    s.sessions = j.sessions;
    s.payload_mac = j.payload_mac;
    s.optimizer = optimizer_of(j.optimizer);
    s.values = j.deterministic ? gen::Values::order_sensitive : gen::Values::exact;
    tj.rank_ips = j.worker_ipv4;
    if (!j.allowed_sources.empty()) {
      tj.source_net = j.allowed_sources[0].addr;
      tj.source_prefix = j.allowed_sources[0].prefix_len;
    }
    t.jobs.push_back(std::move(tj));
  }
  if (t.jobs.empty()) return unexpected(path + ": no jobs to emulate");
  return t;
}

Expected<gen::JobSpec, std::string> parse_job(const std::string& text, uint16_t server_lcores) {
  gen::JobSpec s;
  s.server_lcores = server_lcores;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return unexpected("job: '" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto num = [&]() { return number(k, v); };
    if (k == "name") { s.name = v; continue; }
    if (k == "secret") { s.secret = v; continue; }
    if (k == "dtype") {
      auto d = parse_dtype(v);
      if (!d) return unexpected("job dtype: '" + v + "' is not fp32|fp16|bf16");
      s.dtype = *d;
      continue;
    }
    if (k == "mode" || k == "reduce" || k == "values") {  // a choice of two words: the second is true
      static const std::map<std::string, std::pair<std::string, std::string>> kChoices = {
          {"mode", {"allreduce", "ps"}}, {"reduce", {"sum", "mean"}}, {"values", {"exact", "order"}}};
      const auto& [first, second] = kChoices.at(k);
      if (v != first && v != second) return unexpected("job " + k + ": '" + v + "' is not " + first + "|" + second);
      const bool pick = v == second;
      if (k == "mode") s.mode = pick ? gen::Mode::ps : gen::Mode::allreduce;
      if (k == "reduce") s.mean = pick;
      if (k == "values") s.values = pick ? gen::Values::order_sensitive : gen::Values::exact;
      continue;
    }
    if (k == "optimizer") {
      static const char* names[] = {"sgd", "momentum", "nesterov", "adam"};
      bool found = false;
      for (int i = 0; i < 4; ++i) {
        if (v != names[i]) continue;
        s.optimizer.kind = static_cast<agg::OptimizerKind>(i);
        found = true;
      }
      if (!found) return unexpected("job optimizer: '" + v + "' is not sgd|momentum|nesterov|adam");
      continue;
    }
    if (k == "keys" || k == "elems") {
      std::stringstream ks(v);
      for (std::string e; std::getline(ks, e, '+');) {
        auto n = number(k, e);
        if (!n || *n < 1) return unexpected("job keys: '" + e + "' is not a positive element count");
        s.key_elems.push_back(static_cast<uint64_t>(*n));
      }
      continue;
    }
    auto n = num();
    if (!n) return unexpected(n.error());
    if (k == "id") s.id = static_cast<uint32_t>(*n);
    else if (k == "workers") s.workers = static_cast<uint16_t>(*n);
    else if (k == "chunk_bytes") s.chunk_bytes = static_cast<uint32_t>(*n);
    else if (k == "port_base") s.port_base = static_cast<uint16_t>(*n);
    else if (k == "lcores") s.server_lcores = static_cast<uint16_t>(*n);
    else if (k == "round_modulus") s.round_modulus = static_cast<uint32_t>(*n);
    else if (k == "deterministic") s.deterministic = *n != 0;
    else if (k == "crc") s.crc = *n != 0;
    else if (k == "hparams") s.hparams = *n != 0;
    else if (k == "sessions") s.sessions = *n != 0;
    else if (k == "payload_mac") s.payload_mac = *n != 0;
    else if (k == "lr") s.optimizer.lr = static_cast<float>(*n);
    else if (k == "momentum") s.optimizer.momentum = static_cast<float>(*n);
    else return unexpected("job: unknown key '" + k + "'");
  }
  if (s.key_elems.empty()) return unexpected("job: no keys (keys=N+M+... or elems=N)");
  if (s.workers == 0 || s.server_lcores == 0) return unexpected("job: workers and lcores must be at least 1");
  if (s.sessions && s.secret.empty()) return unexpected("job: sessions=1 needs a secret (the session keys come from it)");
  if (s.payload_mac && !s.sessions) return unexpected("job: payload_mac=1 needs sessions=1");
  if (s.sessions && s.crc) {
    return unexpected("job: crc=1 and sessions=1: a session packet carries no CRC (payload_mac=1 protects the payload)");
  }
  if (s.deterministic && s.values == gen::Values::exact && text.find("values=") == std::string::npos) {
    s.values = gen::Values::order_sensitive;
  }
  return s;
}

}  // namespace phub::pktgen

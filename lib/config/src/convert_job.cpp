// Conversion of one job (tenant): mode, dtype, workers, ports, keys, optimizer, checkpoint, limits, rack ranks.
#include <algorithm>
#include <utility>

#include "convert.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"
#include "phub/config/text.hpp"

namespace phub::config::detail {
namespace {

constexpr std::pair<std::string_view, JobMode> kModes[] = {{"allreduce", JobMode::allreduce}, {"ps", JobMode::ps}};
constexpr std::pair<std::string_view, Reduce> kReduce[] = {{"sum", Reduce::sum}, {"mean", Reduce::mean}};
constexpr std::pair<std::string_view, Nonfinite> kNonfinite[] = {{"refuse", Nonfinite::refuse}, {"pass", Nonfinite::pass}};
constexpr std::pair<std::string_view, Dtype> kDtypes[] = {
    {"fp32", Dtype::fp32}, {"fp16", Dtype::fp16}, {"bf16", Dtype::bf16}};
constexpr std::pair<std::string_view, OptimizerKind> kOptimizers[] = {{"sgd", OptimizerKind::sgd},
                                                                       {"momentum", OptimizerKind::momentum},
                                                                       {"nesterov", OptimizerKind::nesterov},
                                                                       {"adam", OptimizerKind::adam}};

constexpr size_t kMaxKeys = 1u << 20;
constexpr size_t kMaxSecretBytes = 1024;
constexpr size_t kMinSecretBytes = 16;  // shorter ones need insecure = true

void convert_optimizer(Record& r, Optimizer& o) {
  r.choice<OptimizerKind>("kind", o.kind, kOptimizers);
  r.number("lr", o.lr, [](double x) { return x > 0; }, "is not > 0");
  r.number("momentum", o.momentum, [](double x) { return x >= 0 && x <= 1; }, "is not in [0, 1]");
  r.number("beta1", o.beta1, [](double x) { return x >= 0 && x < 1; }, "is not in [0, 1)");
  r.number("beta2", o.beta2, [](double x) { return x >= 0 && x < 1; }, "is not in [0, 1)");
  r.number("eps", o.eps, [](double x) { return x > 0; }, "is not > 0");
  r.number("weight_decay", o.weight_decay, [](double x) { return x >= 0; }, "is not >= 0");
  r.boolean("adamw", o.adamw);
}

// `workers`: a count, or the list of the workers' addresses in rank order.
void convert_workers(Record& r, Job& j) {
  const Value* v = r.get("workers", true);
  if (v == nullptr) return;
  std::string path = r.path("workers");
  if (v->kind != Value::Kind::table) {
    r.integer("workers", j.workers, 1, kMaxWorkers);
    return;
  }
  auto items = as_list(*v, path, r.errors());
  if (items.empty() || items.size() > kMaxWorkers) {
    r.errors().add(path, "a list of " + std::to_string(items.size()) + " addresses is not 1.." +
                             std::to_string(kMaxWorkers) + " workers");
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (auto a = as_ipv4(*items[i], index_path(path, i + 1), PrefixForm::bare, r.errors())) {
      j.worker_ipv4.push_back(a->addr);
    }
  }
  j.workers = static_cast<uint16_t>(items.size());
}

void convert_keys(Record& r, Job& j) {
  const Value* v = r.get("keys", true);
  if (v == nullptr) return;
  std::string path = r.path("keys");
  auto items = as_list(*v, path, r.errors());
  if (items.empty() || items.size() > kMaxKeys) {
    if (v->kind == Value::Kind::table) {
      r.errors().add(path, std::to_string(items.size()) + " keys is not 1.." + std::to_string(kMaxKeys));
    }
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    std::string kp = index_path(path, i + 1);
    if (!expect_kind(*items[i], Value::Kind::table, "table {name = ..., elems = ...}", kp, r.errors())) continue;
    Record k(*items[i], kp, r.errors());
    Key key;
    read_name(k, "name", key.name);
    k.integer("elems", key.elems, 1, static_cast<int64_t>(kMaxKeyElems), true);
    j.keys.push_back(std::move(key));
  }
}

void convert_allowed_sources(Record& r, Job& j) {
  const Value* v = r.get("allowed_sources");
  if (v == nullptr) return;
  std::string path = r.path("allowed_sources");
  auto items = as_list(*v, path, r.errors());
  for (size_t i = 0; i < items.size(); ++i) {
    std::string ip = index_path(path, i + 1);
    auto p = as_ipv4(*items[i], ip, PrefixForm::optional, r.errors());
    if (!p) continue;
    const uint32_t host_mask = ~ipv4_netmask(p->prefix_len);
    if ((p->addr & host_mask) != 0) {
      r.errors().add(ip, render(*items[i]) + " has host bits set (did you mean \"" +
                             format_ipv4_prefix({p->addr & ~host_mask, p->prefix_len}) + "\"?)");
      continue;
    }
    j.allowed_sources.push_back(*p);
  }
}

// ranks_by_rack = { ["rack-a"] = {0, 1}, ... }, stored in the order of Config::racks (unknown names last).
void convert_ranks_by_rack(Record& r, Job& j, const std::vector<Rack>& racks) {
  const Value* v = r.get("ranks_by_rack");
  if (v == nullptr) return;
  std::string path = r.path("ranks_by_rack");
  if (!expect_kind(*v, Value::Kind::table, "table {[rack name] = {ranks...}}", path, r.errors())) return;
  for (const Entry& e : v->entries) {
    if (e.key.kind != Value::Kind::string) {
      r.errors().add(path + "[" + render(e.key) + "]", "unexpected key (keys are rack names)");
      continue;
    }
    std::string rp = field_path(path, e.key.text);
    std::vector<uint16_t> ranks;
    auto items = as_list(e.value, rp, r.errors());
    for (size_t i = 0; i < items.size(); ++i) {
      if (auto x = as_integer(*items[i], index_path(rp, i + 1), 0, kMaxWorkers - 1, r.errors())) {
        ranks.push_back(static_cast<uint16_t>(*x));
      }
    }
    j.ranks_by_rack.emplace_back(e.key.text, std::move(ranks));
  }
  auto position = [&](const std::string& name) {
    return std::find_if(racks.begin(), racks.end(), [&](const Rack& k) { return k.name == name; }) - racks.begin();
  };
  std::stable_sort(j.ranks_by_rack.begin(), j.ranks_by_rack.end(),
                   [&](const auto& a, const auto& b) { return position(a.first) < position(b.first); });
}

}  // namespace

Job convert_job(const Value& v, const std::string& path, const Limits& limits, const Checkpoints& checkpoints,
                const std::vector<Rack>& racks, Errors& errors) {
  Job j;
  if (!expect_kind(v, Value::Kind::table, "table", path, errors)) return j;
  Record r(v, path, errors);
  r.integer("id", j.id, 1, UINT32_MAX, true);
  read_name(r, "name", j.name);
  r.choice<JobMode>("mode", j.mode, kModes);
  r.choice<Reduce>("reduce", j.reduce, kReduce);
  r.choice<Dtype>("dtype", j.dtype, kDtypes);
  r.boolean("deterministic", j.deterministic);
  // A non-finite value in a ps job's weights stays there for good: refused unless the job says otherwise.
  j.nonfinite = j.mode == JobMode::ps ? Nonfinite::refuse : Nonfinite::pass;
  r.choice<Nonfinite>("nonfinite", j.nonfinite, kNonfinite);
  convert_workers(r, j);
  r.integer("port_base", j.port_base, 1, 65535, true);
  r.string("secret", j.secret);
  r.boolean("insecure", j.insecure);
  // A job with a secret runs sessions unless it says otherwise: without them a recorded packet replays and a
  // replayed join moves a rank's reply address (docs/security.md).
  j.sessions = !j.secret.empty();
  r.boolean("sessions", j.sessions);
  r.boolean("payload_mac", j.payload_mac);
  r.boolean("interface_map", j.interface_map);
  // Session keys derive from the job key: without a secret there is nothing to derive them from.
  if (j.sessions && j.secret.empty()) {
    errors.add(r.path("sessions"), "needs a secret (session keys derive from the job key)");
  } else if (!j.sessions && !j.secret.empty() && !j.insecure) {
    errors.add(r.path("sessions"), "false with a secret: recorded packets then replay and a replayed join moves a "
                                   "rank's reply address (or say insecure = true)");
  }
  if (j.payload_mac && !j.sessions) {
    errors.add(r.path("payload_mac"), "needs sessions = true (the payload MAC is keyed by the session)");
  }
  if (j.secret == kRedactedSecret) {
    errors.add(r.path("secret"), "redacted (phub-ctl config and phub-server --print-config print no secret): "
                                 "give the job's real secret, or dump with phub-ctl config --show-secrets");
  } else if (j.secret.size() > kMaxSecretBytes) {
    errors.add(r.path("secret"), "a secret of " + std::to_string(j.secret.size()) + " bytes is longer than " +
                                     std::to_string(kMaxSecretBytes));
  } else if (j.secret.empty() && !j.insecure) {
    errors.add(r.path("secret"), "missing: a job without a secret must say insecure = true (anyone who can reach "
                                 "its ports can then push, pull and reset it)");
  } else if (j.secret.size() < kMinSecretBytes && !j.insecure) {
    errors.add(r.path("secret"), "a secret of " + std::to_string(j.secret.size()) + " bytes is shorter than " +
                                     std::to_string(kMinSecretBytes) + " (or say insecure = true)");
  }
  j.quota_bytes = limits.memory_bytes;
  r.size("quota_bytes", j.quota_bytes, 1, kMaxSizeBytes);
  r.size("chunk_bytes", j.chunk_bytes, 1024, 1u << 20);
  if (j.chunk_bytes % 64 != 0) {
    errors.add(r.path("chunk_bytes"), std::to_string(j.chunk_bytes) + " is not a multiple of 64");
  }
  convert_keys(r, j);
  if (r.has("optimizer") && j.mode != JobMode::ps) {
    r.get("optimizer");
    errors.add(r.path("optimizer"), "only allowed in ps mode (mode is \"allreduce\")");
  } else if (const Value* o = r.get("optimizer")) {
    if (expect_kind(*o, Value::Kind::table, "table", r.path("optimizer"), errors)) {
      Record opt(*o, r.path("optimizer"), errors);
      convert_optimizer(opt, j.optimizer);
    }
  }
  if (j.mode == JobMode::ps) j.checkpoint = checkpoints;
  if (r.has("checkpoint") && j.mode != JobMode::ps) {
    r.get("checkpoint");
    errors.add(r.path("checkpoint"), "only allowed in ps mode (an allreduce job keeps no state between rounds)");
  } else if (const Value* cv = r.get("checkpoint")) {
    if (expect_kind(*cv, Value::Kind::table, "table", r.path("checkpoint"), errors)) {
      Record ck(*cv, r.path("checkpoint"), errors);
      convert_checkpoints(ck, j.checkpoint);
    }
  }
  r.integer("round_modulus", j.round_modulus, 0, UINT32_MAX);
  if (const Value* sv = r.get("shard")) {
    if (expect_kind(*sv, Value::Kind::table, "table", r.path("shard"), errors)) {
      Record shard(*sv, r.path("shard"), errors);
      shard.integer("count", j.shard_count, 1, 256, true);
      shard.integer("index", j.shard_index, 0, 255, true);
    }
  }
  r.integer("rate_limit_pps", j.rate_limit_pps, 0, 1'000'000'000'000);
  r.integer("answer_bytes_per_s", j.answer_bytes_per_s, 0, 1'000'000'000'000);
  convert_allowed_sources(r, j);
  convert_ranks_by_rack(r, j, racks);
  return j;
}

}  // namespace phub::config::detail

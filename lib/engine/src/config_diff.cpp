// The difference between the running config and a new one (see config_diff.hpp).
#include "phub/engine/config_diff.hpp"

#include <algorithm>

namespace phub::engine {
namespace {

const config::Job* find_job(const config::Config& c, uint32_t id) {
  for (const auto& j : c.jobs) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

std::string names_of(const std::vector<uint32_t>& ids, const config::Config& c) {
  std::string out;
  for (uint32_t id : ids) {
    const config::Job* j = find_job(c, id);
    out += (out.empty() ? "" : ", ") + (j != nullptr ? j->name : std::to_string(id));
  }
  return out;
}

// Collects "FIELD: changing WHAT needs a restart" for every field of a pair that differs.
class Refusals {
 public:
  explicit Refusals(std::vector<std::string>& out) : out_(out) {}
  template <class T>
  void check(const std::string& field, const T& a, const T& b, std::string_view what) {
    if (!(a == b)) out_.push_back(field + ": changing " + std::string(what) + " needs a restart");
  }

 private:
  std::vector<std::string>& out_;
};

void diff_server(const config::Config& a, const config::Config& b, ConfigDiff& d) {
  Refusals r(d.refused);
  r.check("eal_args", a.eal_args, b.eal_args, "the EAL arguments");
  r.check("ports", a.ports, b.ports, "ports (devices, addresses, MTU, queues, steering, udp_checksum)");
  r.check("lcores", a.lcores, b.lcores, "lcores");
  r.check("polling", a.polling, b.polling, "the polling back-off");
  r.check("racks", a.racks, b.racks, "the racks");
  r.check("rack", a.rack, b.rack, "this server's rack");
  r.check("limits.mbufs", a.limits.mbufs, b.limits.mbufs, "the mbufs per port");
  r.check("limits.ring_entries", a.limits.ring_entries, b.limits.ring_entries, "the hand-off rings");
  r.check("control.socket_path", a.control.socket_path, b.control.socket_path, "the control socket");
  // The Prometheus endpoint is bound once, at start.
  r.check("control.metrics_address", a.control.metrics_address, b.control.metrics_address,
          "the Prometheus endpoint");
  d.settings_changed = !(a.timeouts == b.timeouts) || a.limits.memory_bytes != b.limits.memory_bytes ||
                       a.limits.max_jobs != b.limits.max_jobs || a.limits.arp_icmp_per_s != b.limits.arp_icmp_per_s ||
                       a.limits.arp_icmp_burst != b.limits.arp_icmp_burst ||
                       a.control.stats_interval_ms != b.control.stats_interval_ms ||
                       a.control.metrics_interval_ms != b.control.metrics_interval_ms ||
                       !(a.checkpoints == b.checkpoints);
}

// A job in both configs: what may not change while it runs, and whether anything else did.
bool diff_job(const config::Job& a, const config::Job& b, const std::string& at, std::vector<std::string>& refused) {
  Refusals r(refused);
  r.check(at + ".mode", a.mode, b.mode, "the mode");
  r.check(at + ".reduce", a.reduce, b.reduce, "the reduction");
  r.check(at + ".dtype", a.dtype, b.dtype, "the dtype");
  r.check(at + ".deterministic", a.deterministic, b.deterministic, "deterministic");
  r.check(at + ".workers", a.workers, b.workers, "workers");
  r.check(at + ".port_base", a.port_base, b.port_base, "the ports");
  r.check(at + ".chunk_bytes", a.chunk_bytes, b.chunk_bytes, "chunk_bytes");
  r.check(at + ".keys", a.keys, b.keys, "keys");
  r.check(at + ".optimizer", a.optimizer, b.optimizer, "the optimizer");
  r.check(at + ".round_modulus", a.round_modulus, b.round_modulus, "round_modulus");
  r.check(at + ".shard_count", a.shard_count, b.shard_count, "the sharding");
  r.check(at + ".shard_index", a.shard_index, b.shard_index, "the sharding");
  r.check(at + ".ranks_by_rack", a.ranks_by_rack, b.ranks_by_rack, "ranks_by_rack");
  // Running workers speak session packets or not from their join on: the mode cannot change under them.
  r.check(at + ".sessions", a.sessions, b.sessions, "sessions");
  r.check(at + ".payload_mac", a.payload_mac, b.payload_mac, "payload_mac");
  // checkpoint (dir, every_rounds, every_s, keep) changes in place: the control thread reads it from the plan.
  return !(a == b);
}

}  // namespace

ConfigDiff diff_configs(const config::Config& running, const config::Config& next) {
  ConfigDiff d;
  diff_server(running, next, d);
  for (size_t i = 0; i < next.jobs.size(); ++i) {
    const config::Job& b = next.jobs[i];
    const config::Job* a = find_job(running, b.id);
    if (a == nullptr) {
      d.added.push_back(b.id);
      continue;
    }
    const std::string at = "jobs[" + std::to_string(i + 1) + "]";
    (diff_job(*a, b, at, d.refused) ? d.changed : d.unchanged).push_back(b.id);
  }
  for (const auto& a : running.jobs) {
    if (find_job(next, a.id) == nullptr) d.removed.push_back(a.id);
  }
  return d;
}

std::string ConfigDiff::describe(const config::Config& next) const {
  auto part = [&](const char* what, const std::vector<uint32_t>& ids, const config::Config& c) {
    std::string s = std::string(what) + " " + std::to_string(ids.size());
    if (!ids.empty()) s += " (" + names_of(ids, c) + ")";
    return s;
  };
  std::string s = part("added", added, next) + ", " + part("changed", changed, next) + ", removed " +
                  std::to_string(removed.size()) + ", unchanged " + std::to_string(unchanged.size());
  if (settings_changed) s += ", server settings changed";
  return s;
}

}  // namespace phub::engine

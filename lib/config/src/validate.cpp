// The cross-field rules of a config: uniqueness, references, job port ranges, checkpoints, racks and rank
// coverage.
#include <algorithm>
#include <map>
#include <optional>

#include "convert.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"
#include "phub/config/queue_map.hpp"
#include "phub/config/text.hpp"
#include "reader.hpp"

namespace phub::config {
namespace {

using detail::Errors;
using detail::index_path;
using detail::quote;

// Reports every element whose key(element) was already seen: "<path>: <key> is used twice (<first path>)".
template <class T, class K, class Show>
void unique(const std::vector<T>& items, std::string_view list, std::string_view field, K key, Show show,
            Errors& errors) {
  std::map<decltype(key(items[0])), size_t> first;
  for (size_t i = 0; i < items.size(); ++i) {
    auto [it, inserted] = first.emplace(key(items[i]), i);
    if (!inserted) {
      errors.add(index_path(list, i + 1) + "." + std::string(field),
                 show(items[i]) + " is used twice (" + index_path(list, it->second + 1) + ")");
    }
  }
}

std::string str(const std::string& s) { return quote(s); }

void check_ports_and_lcores(const Config& c, Errors& errors) {
  unique(c.ports, "ports", "name", [](const Port& p) { return p.name; }, [](const Port& p) { return str(p.name); },
         errors);
  unique(c.ports, "ports", "ipv4", [](const Port& p) { return p.ipv4.addr; },
         [](const Port& p) { return format_ipv4(p.ipv4.addr); }, errors);
  unique(c.lcores, "lcores", "id", [](const Lcore& l) { return l.id; },
         [](const Lcore& l) { return std::to_string(l.id); }, errors);
  std::vector<bool> polled(c.ports.size(), false);
  for (size_t i = 0; i < c.lcores.size(); ++i) {
    const Lcore& l = c.lcores[i];
    std::string lp = index_path("lcores", i + 1) + ".ports";
    for (size_t k = 0; k < l.ports.size(); ++k) {
      auto it = std::find_if(c.ports.begin(), c.ports.end(), [&](const Port& p) { return p.name == l.ports[k]; });
      if (it == c.ports.end()) {
        errors.add(index_path(lp, k + 1), str(l.ports[k]) + " is not a port name (see ports[].name)");
      } else {
        polled[static_cast<size_t>(it - c.ports.begin())] = true;
      }
      if (std::find(l.ports.begin(), l.ports.begin() + static_cast<ptrdiff_t>(k), l.ports[k]) !=
          l.ports.begin() + static_cast<ptrdiff_t>(k)) {
        errors.add(index_path(lp, k + 1), str(l.ports[k]) + " is listed twice");
      }
    }
    if (l.ports.empty()) polled.assign(c.ports.size(), true);
  }
  for (size_t i = 0; i < c.ports.size(); ++i) {
    if (!polled[i]) errors.add(index_path("ports", i + 1), "no lcore polls it (add its name to some lcores[].ports)");
    // A PMD with a fixed number of queue pairs: each lcore needs a TX queue of its own on every port.
    const auto fixed = fixed_rx_queues(c.ports[i].device);
    if (fixed && *fixed < c.lcores.size()) {
      errors.add(index_path("ports", i + 1) + ".device",
                 "net_af_packet has qpairs=" + std::to_string(*fixed) + " queue pairs, but each of the " +
                     std::to_string(c.lcores.size()) +
                     " lcores transmits on every port on a queue of its own: set qpairs=" +
                     std::to_string(c.lcores.size()) +
                     " (or more: the RX queues are dealt in turn to the lcores that poll the port)");
    }
  }
  if ((c.polling.idle_polls_before_sleep == 0) != (c.polling.idle_sleep_us == 0)) {
    errors.add("polling", "idle_polls_before_sleep and idle_sleep_us must both be 0 (busy-poll) or both be > 0");
  }
}

void check_racks(const Config& c, Errors& errors) {
  unique(c.racks, "racks", "name", [](const Rack& r) { return r.name; }, [](const Rack& r) { return str(r.name); },
         errors);
  unique(c.racks, "racks", "hub_ipv4", [](const Rack& r) { return r.hub_ipv4; },
         [](const Rack& r) { return format_ipv4(r.hub_ipv4); }, errors);
  if (c.racks.empty()) {
    if (!c.rack.empty()) errors.add("rack", str(c.rack) + " is set but there are no racks");
    return;
  }
  auto self = std::find_if(c.racks.begin(), c.racks.end(), [&](const Rack& r) { return r.name == c.rack; });
  if (c.rack.empty()) {
    errors.add("rack", "missing (required when racks are set: the name of this server's rack)");
  } else if (self == c.racks.end()) {
    errors.add("rack", str(c.rack) + " is not one of racks[].name");
  } else if (std::none_of(c.ports.begin(), c.ports.end(), [&](const Port& p) { return p.ipv4.addr == self->hub_ipv4; })) {
    errors.add(index_path("racks", static_cast<size_t>(self - c.racks.begin()) + 1) + ".hub_ipv4",
               format_ipv4(self->hub_ipv4) + " is this server's rack hub but no port has that address");
  }
}

void check_ranks_by_rack(const Config& c, const Job& j, const std::string& path, Errors& errors) {
  std::string rp = path + ".ranks_by_rack";
  if (c.racks.empty()) {
    if (!j.ranks_by_rack.empty()) errors.add(rp, "set but there are no racks");
    return;
  }
  if (j.ranks_by_rack.empty()) {
    errors.add(rp, "missing (required when racks are set)");
    return;
  }
  std::vector<std::optional<std::string>> owner(j.workers);
  for (const auto& entry : j.ranks_by_rack) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture those
    const std::vector<uint16_t>& ranks = entry.second;
    std::string np = detail::field_path(rp, name);
    if (std::none_of(c.racks.begin(), c.racks.end(), [&](const Rack& r) { return r.name == name; })) {
      errors.add(np, "no such rack (see racks[].name)");
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      uint16_t rank = ranks[i];
      if (rank >= j.workers) {
        errors.add(index_path(np, i + 1), std::to_string(rank) + " is not in 0.." + std::to_string(j.workers - 1) +
                                              " (workers is " + std::to_string(j.workers) + ")");
      } else if (owner[rank]) {
        errors.add(index_path(np, i + 1), "rank " + std::to_string(rank) + " is also in " + str(*owner[rank]));
      } else {
        owner[rank] = name;
      }
    }
  }
  for (size_t rank = 0; rank < owner.size(); ++rank) {
    if (!owner[rank]) errors.add(rp, "rank " + std::to_string(rank) + " is in no rack");
  }
}

// A checkpoint file is named after its job: "<name>.s<shard>.r<round>.phubckpt" (lib/persist).
bool valid_checkpoint_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '.' || ch == '-';
  });
}

// Intervals need a directory to write to.
void check_checkpoint_dir(const Checkpoints& k, const std::string& path, Errors& errors) {
  if (k.dir.empty() && (k.every_rounds != 0 || k.every_s != 0)) {
    errors.add(path, "every_rounds or every_s is set but dir is empty (no directory to write to)");
  }
}

void check_checkpoints(const Config& c, const Job& j, const std::string& path, Errors& errors) {
  if (!(j.checkpoint == c.checkpoints)) check_checkpoint_dir(j.checkpoint, path + ".checkpoint", errors);
  if (j.checkpoint.enabled() && !valid_checkpoint_name(j.name)) {
    errors.add(path + ".name", str(j.name) + " cannot name a checkpoint file (1..64 characters of A-Z a-z 0-9 _ . -)"
                               " and checkpoint.dir is set");
  }
  if (j.checkpoint.enabled() && j.id > UINT16_MAX) {
    errors.add(path + ".id", std::to_string(j.id) + " is above 65535, the largest job id a checkpoint file holds, "
                             "and checkpoint.dir is set");
  }
}

void check_jobs(const Config& c, Errors& errors) {
  check_checkpoint_dir(c.checkpoints, "checkpoints", errors);
  if (c.jobs.size() > c.limits.max_jobs) {
    errors.add("jobs", std::to_string(c.jobs.size()) + " jobs exceed limits.max_jobs (" +
                           std::to_string(c.limits.max_jobs) + ")");
  }
  unique(c.jobs, "jobs", "id", [](const Job& j) { return j.id; }, [](const Job& j) { return std::to_string(j.id); },
         errors);
  unique(c.jobs, "jobs", "name", [](const Job& j) { return j.name; }, [](const Job& j) { return str(j.name); },
         errors);
  const uint32_t nlcores = static_cast<uint32_t>(std::max<size_t>(c.lcores.size(), 1));
  // The server tells the previous, the current and a later round apart by their distance modulo this.
  constexpr uint32_t min_modulus = 4;
  for (size_t i = 0; i < c.jobs.size(); ++i) {
    const Job& j = c.jobs[i];
    std::string path = index_path("jobs", i + 1);
    uint32_t last = j.port_base + nlcores - 1;
    if (j.port_base == 0 || last > 65535) {
      errors.add(path + ".port_base", std::to_string(j.port_base) + ": ports " + std::to_string(j.port_base) + ".." +
                                          std::to_string(last) + " (one per lcore) are not all in 1..65535");
    }
    for (size_t k = 0; k < i; ++k) {
      uint32_t other_last = c.jobs[k].port_base + nlcores - 1;
      if (j.port_base <= other_last && c.jobs[k].port_base <= last) {
        errors.add(path + ".port_base", "ports " + std::to_string(j.port_base) + ".." + std::to_string(last) +
                                            " overlap " + index_path("jobs", k + 1) + " (" +
                                            std::to_string(c.jobs[k].port_base) + ".." + std::to_string(other_last) +
                                            ")");
      }
    }
    unique(j.keys, path + ".keys", "name", [](const Key& k) { return k.name; },
           [](const Key& k) { return str(k.name); }, errors);
    if (j.quota_bytes == 0 || j.quota_bytes > c.limits.memory_bytes) {
      errors.add(path + ".quota_bytes", format_size(j.quota_bytes) + " is not in 1B..limits.memory_bytes (" +
                                            format_size(c.limits.memory_bytes) + ")");
    }
    if (j.round_modulus != 0 && j.round_modulus < min_modulus) {
      errors.add(path + ".round_modulus", std::to_string(j.round_modulus) + " must be 0 or at least " +
                                              std::to_string(min_modulus));
    }
    if (j.mode != JobMode::ps && !(j.optimizer == Optimizer{})) {
      errors.add(path + ".optimizer", "only allowed in ps mode (mode is \"allreduce\")");
    }
    if (j.shard_index >= j.shard_count) {
      errors.add(path + ".shard.index", std::to_string(j.shard_index) + " is not below shard.count (" +
                                            std::to_string(j.shard_count) + ")");
    }
    if (!j.worker_ipv4.empty() && j.worker_ipv4.size() != j.workers) {
      errors.add(path + ".workers", "the address list does not have one entry per worker");
    }
    if (j.mode != JobMode::ps && !(j.checkpoint == Checkpoints{})) {
      errors.add(path + ".checkpoint", "only allowed in ps mode (an allreduce job keeps no state between rounds)");
    }
    check_checkpoints(c, j, path, errors);
    check_ranks_by_rack(c, j, path, errors);
  }
}

}  // namespace

namespace detail {
void validate_into(const Config& config, Errors& errors) {
  check_ports_and_lcores(config, errors);
  check_racks(config, errors);
  check_jobs(config, errors);
}
}  // namespace detail

Expected<void, std::string> validate(const Config& config) {
  Errors errors;
  detail::validate_into(config, errors);
  if (errors.empty()) return {};
  return unexpected(errors.join(""));
}

}  // namespace phub::config

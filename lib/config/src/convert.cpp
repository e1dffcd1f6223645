// Conversion of the top level of a config: EAL arguments, ports, lcores, racks and the limit sections.
#include "convert.hpp"

#include <algorithm>
#include <utility>

#include "phub/base/eal_args.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"
#include "phub/config/text.hpp"

namespace phub::config::detail {
namespace {

constexpr std::pair<std::string_view, Steering> kSteering[] = {
    {"auto", Steering::automatic}, {"flow", Steering::flow}, {"ring", Steering::ring}};
constexpr std::pair<std::string_view, UdpChecksum> kUdpChecksum[] = {{"verify", UdpChecksum::verify},
                                                                     {"trust", UdpChecksum::trust}};

constexpr size_t kMaxSocketPathBytes = 107;  // sockaddr_un::sun_path, less the terminating NUL
constexpr int64_t kMaxMs = 3'600'000;        // one hour
constexpr size_t kMaxPathBytes = 4095;       // PATH_MAX less the terminating NUL

bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The table at `key` read as a record by `fill`, when present.
template <class F>
void section(Record& parent, std::string_view key, F fill) {
  if (const Value* v = parent.get(key)) {
    if (expect_kind(*v, Value::Kind::table, "table", parent.path(key), parent.errors())) {
      Record r(*v, parent.path(key), parent.errors());
      fill(r);
    }
  }
}

// Each element of the list at `key` converted by `one(element, path)`; "at least one" when required.
template <class T, class F>
std::vector<T> list_of(Record& parent, std::string_view key, bool required, F one) {
  std::vector<T> out;
  const Value* v = parent.get(key, required);
  if (v == nullptr) return out;
  std::string path = parent.path(key);
  auto items = as_list(*v, path, parent.errors());
  if (required && items.empty() && v->kind == Value::Kind::table && v->entries.empty()) {
    parent.errors().add(path, "empty (at least one is required)");
  }
  for (size_t i = 0; i < items.size(); ++i) out.push_back(one(*items[i], index_path(path, i + 1)));
  return out;
}

std::vector<std::string> strings_of(const Value& v, const std::string& path, Errors& errors) {
  std::vector<std::string> out;
  auto items = as_list(v, path, errors);
  for (size_t i = 0; i < items.size(); ++i) {
    if (auto s = as_string(*items[i], index_path(path, i + 1), errors)) out.push_back(std::move(*s));
  }
  return out;
}

std::vector<std::string> eal_args(const Value& v, const std::string& path, Errors& errors) {
  if (v.kind != Value::Kind::string) return strings_of(v, path, errors);
  return split_eal_args(v.text);
}

// A port's own address must be a unicast host address, not its prefix's network or broadcast address.
bool host_address_ok(const Ipv4Prefix& p) {
  uint32_t first = p.addr >> 24;
  if (first == 0 || first == 127 || first >= 224 || p.prefix_len == 0) return false;
  if (p.prefix_len >= 31) return true;
  uint32_t host_mask = ~0u >> p.prefix_len;
  return (p.addr & host_mask) != 0 && (p.addr & host_mask) != host_mask;
}

Port convert_port(const Value& v, const std::string& path, Errors& errors) {
  Port p;
  if (!expect_kind(v, Value::Kind::table, "table", path, errors)) return p;
  Record r(v, path, errors);
  read_name(r, "name", p.name);
  r.string("device", p.device, true);
  if (r.has("device") && p.device.empty()) errors.add(r.path("device"), "\"\" is empty (DPDK devargs expected)");
  if (const Value* ip = r.get("ipv4", true)) {
    if (auto a = as_ipv4(*ip, r.path("ipv4"), PrefixForm::required, errors)) {
      if (host_address_ok(*a)) {
        p.ipv4 = *a;
      } else {
        errors.add(r.path("ipv4"), render(*ip) + " is not a unicast host address of its prefix");
      }
    }
  }
  if (const Value* m = r.get("mac")) {
    if (auto s = as_string(*m, r.path("mac"), errors)) {
      if (auto mac = parse_mac_address(*s)) {
        p.mac = *mac;
      } else {
        errors.add(r.path("mac"), render(*m) + " is not a MAC address (\"aa:bb:cc:dd:ee:ff\")");
      }
    }
  }
  r.integer("mtu", p.mtu, 576, 9000);
  r.integer("rx_desc", p.rx_desc, 32, 32768);
  r.integer("tx_desc", p.tx_desc, 32, 32768);
  r.choice<Steering>("steering", p.steering, kSteering);
  r.boolean("tx_copy", p.tx_copy);
  r.choice<UdpChecksum>("udp_checksum", p.udp_checksum, kUdpChecksum);
  return p;
}

Lcore convert_lcore(const Value& v, const std::string& path, Errors& errors) {
  Lcore l;
  if (!expect_kind(v, Value::Kind::table, "table", path, errors)) return l;
  Record r(v, path, errors);
  r.integer("id", l.id, 1, kMaxLcoreId, true);
  if (const Value* ports = r.get("ports")) l.ports = strings_of(*ports, r.path("ports"), errors);
  r.boolean("cross_socket", l.cross_socket);
  return l;
}

Rack convert_rack(const Value& v, const std::string& path, Errors& errors) {
  Rack k;
  if (!expect_kind(v, Value::Kind::table, "table", path, errors)) return k;
  Record r(v, path, errors);
  read_name(r, "name", k.name);
  if (const Value* ip = r.get("hub_ipv4", true)) {
    if (auto a = as_ipv4(*ip, r.path("hub_ipv4"), PrefixForm::bare, errors)) k.hub_ipv4 = a->addr;
  }
  r.integer("hub_port_base", k.hub_port_base, 0, 65535);
  return k;
}

void convert_polling(Record& r, Polling& p) {
  r.integer("idle_polls_before_sleep", p.idle_polls_before_sleep, 0, UINT32_MAX);
  r.integer("idle_sleep_us", p.idle_sleep_us, 0, 100'000);
}

void convert_timeouts(Record& r, Timeouts& t) {
  r.integer("round_stall_ms", t.round_stall_ms, 1, kMaxMs);
  r.integer("drain_ms", t.drain_ms, 0, 600'000);
  r.integer("secret_overlap_ms", t.secret_overlap_ms, 0, kMaxMs);
}

void convert_limits(Record& r, Limits& l) {
  r.size("memory_bytes", l.memory_bytes, 1ull << 20, kMaxSizeBytes);
  r.integer("max_jobs", l.max_jobs, 1, 65535);
  r.integer("mbufs", l.mbufs, 255, (1 << 24) - 1);
  r.integer("arp_icmp_per_s", l.arp_icmp_per_s, 0, 1'000'000);
  r.integer("arp_icmp_burst", l.arp_icmp_burst, 1, 1'000'000);
  uint32_t ring = l.ring_entries;
  r.integer("ring_entries", ring, 64, 65536);
  if (is_power_of_two(ring)) {
    l.ring_entries = ring;
  } else {
    r.errors().add(r.path("ring_entries"), std::to_string(ring) + " is not a power of two");
  }
}

// "127.0.0.1:9464", "localhost:0": a host (no spaces or colons) and a decimal port.
bool valid_listen_address(const std::string& a) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size() || a.size() - colon - 1 > 5) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char ch = a[i];
    if (ch == ':' || ch == ' ' || static_cast<unsigned char>(ch) < 0x21 || static_cast<unsigned char>(ch) > 0x7e) return false;
  }
  uint32_t port = 0;
  for (size_t i = colon + 1; i < a.size(); ++i) {
    if (a[i] < '0' || a[i] > '9') return false;
    port = port * 10 + static_cast<uint32_t>(a[i] - '0');
  }
  return port <= 65535;
}

void convert_control(Record& r, Control& c) {
  r.string("socket_path", c.socket_path);
  if (c.socket_path.empty() || c.socket_path.size() > kMaxSocketPathBytes) {
    r.errors().add(r.path("socket_path"), quote(c.socket_path) + " is not 1.." +
                                              std::to_string(kMaxSocketPathBytes) + " bytes (a Unix socket path)");
  }
  r.integer("stats_interval_ms", c.stats_interval_ms, 0, kMaxMs);
  r.string("metrics_address", c.metrics_address);
  if (!c.metrics_address.empty() && !valid_listen_address(c.metrics_address)) {
    r.errors().add(r.path("metrics_address"), quote(c.metrics_address) +
                                                  " is not HOST:PORT (an IPv4 address or a name, and a port 0..65535)");
  }
  r.integer("metrics_interval_ms", c.metrics_interval_ms, 10, kMaxMs);
}

}  // namespace

void convert_checkpoints(Record& r, Checkpoints& c) {
  r.string("dir", c.dir);
  if (!c.dir.empty() && (c.dir.front() != '/' || c.dir.size() > kMaxPathBytes || c.dir.find('\0') != std::string::npos)) {
    r.errors().add(r.path("dir"), quote(c.dir) + " is not an absolute path of 1.." + std::to_string(kMaxPathBytes) +
                                      " bytes");
  }
  r.integer("every_rounds", c.every_rounds, 0, UINT32_MAX);
  r.integer("every_s", c.every_s, 0, kMaxCheckpointIntervalS);
  r.integer("keep", c.keep, 1, kMaxCheckpointsKept);
}

bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':' || c == '/' || c == '-';
  });
}

void read_name(Record& r, std::string_view key, std::string& out) {
  const Value* v = r.get(key, true);
  if (v == nullptr) return;
  auto s = as_string(*v, r.path(key), r.errors());
  if (!s) return;
  if (valid_name(*s)) {
    out = std::move(*s);
  } else {
    r.errors().add(r.path(key), render(*v) + " is not a name (1..128 characters of A-Z a-z 0-9 _ . : / -)");
  }
}

std::optional<Ipv4Prefix> as_ipv4(const Value& v, std::string_view path, PrefixForm form, Errors& errors) {
  auto s = as_string(v, path, errors);
  if (!s) return std::nullopt;
  bool has_slash = s->find('/') != std::string::npos;
  std::optional<Ipv4Prefix> p;
  if (has_slash && form != PrefixForm::bare) {
    if (auto a = parse_ipv4_prefix(*s)) p = *a;
  } else if (!has_slash && form != PrefixForm::required) {
    if (auto a = parse_ipv4_address(*s)) p = Ipv4Prefix{*a, 32};
  }
  if (!p) {
    static constexpr std::string_view kRule[] = {"is not an IPv4 address (\"a.b.c.d\")",
                                                 "is not an IPv4 address with prefix (\"a.b.c.d/len\")",
                                                 "is not an IPv4 address or prefix (\"a.b.c.d\" or \"a.b.c.d/len\")"};
    errors.add(path, render(v) + " " + std::string(kRule[static_cast<int>(form)]));
  }
  return p;
}

Config convert(const Value& root, Errors& errors) {
  Config c;
  Record r(root, "", errors);
  if (const Value* v = r.get("eal_args")) c.eal_args = eal_args(*v, r.path("eal_args"), errors);
  c.ports = list_of<Port>(r, "ports", true, [&](const Value& v, const std::string& p) {
    return convert_port(v, p, errors);
  });
  c.lcores = list_of<Lcore>(r, "lcores", true, [&](const Value& v, const std::string& p) {
    return convert_lcore(v, p, errors);
  });
  section(r, "polling", [&](Record& s) { convert_polling(s, c.polling); });
  section(r, "timeouts", [&](Record& s) { convert_timeouts(s, c.timeouts); });
  section(r, "limits", [&](Record& s) { convert_limits(s, c.limits); });
  section(r, "control", [&](Record& s) { convert_control(s, c.control); });
  section(r, "checkpoints", [&](Record& s) { convert_checkpoints(s, c.checkpoints); });
  c.racks = list_of<Rack>(r, "racks", false, [&](const Value& v, const std::string& p) {
    return convert_rack(v, p, errors);
  });
  r.string("rack", c.rack);
  c.jobs = list_of<Job>(r, "jobs", false, [&](const Value& v, const std::string& p) {
    return convert_job(v, p, c.limits, c.checkpoints, c.racks, errors);
  });
  return c;
}

}  // namespace phub::config::detail

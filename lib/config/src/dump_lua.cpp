// dump_lua(): writes a Config back as a Lua config that loads to an equal Config.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"
#include "phub/config/load.hpp"
#include "phub/config/text.hpp"

namespace phub::config {
namespace {

// A Lua string literal for any bytes.
std::string lua_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03u", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The shortest of %.9g / %.17g that reads back as the same float.
std::string lua_float(float x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));
  if (static_cast<float>(std::strtod(buf, nullptr)) != x) std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(x));
  return buf;
}

// A Lua list constructor of already-rendered items: "{ a, b, }".
std::string lua_list(const std::vector<std::string>& items) {
  std::string s = "{";
  for (const auto& i : items) s += " " + i + ",";
  return s + " }";
}

// Writes `key = value,` lines at an indent, and nested tables.
class Writer {
 public:
  void open(std::string_view key) {
    line(std::string(key) + (key.empty() ? "{" : " = {"));
    ++depth_;
  }
  void close(std::string_view end = "},") {
    --depth_;
    line(std::string(end));
  }
  void indent() { ++depth_; }
  void field(std::string_view key, const std::string& value) { line(std::string(key) + " = " + value + ","); }
  void field(std::string_view key, uint64_t value) { field(key, std::to_string(value)); }
  void text(std::string_view key, std::string_view value) { field(key, lua_string(value)); }
  void list(std::string_view key, const std::vector<std::string>& items) { field(key, lua_list(items)); }
  // A nested table of integer fields.
  void integers(std::string_view key, std::initializer_list<std::pair<std::string_view, uint64_t>> fields) {
    open(key);
    for (const auto& [name, value] : fields) field(name, value);
    close();
  }
  void line(const std::string& s) { out_ += std::string(2 * depth_, ' ') + s + "\n"; }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  std::string out_;
  size_t depth_ = 0;
};

template <class T, class F>
std::vector<std::string> map_all(const std::vector<T>& items, F f) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(f(i));
  return out;
}

void dump_port(Writer& w, const Port& p) {
  w.open("");
  w.text("name", p.name);
  w.text("device", p.device);
  w.text("ipv4", format_ipv4_prefix(p.ipv4));
  if (p.mac) w.text("mac", format_mac(*p.mac));
  w.field("mtu", p.mtu);
  w.field("rx_desc", p.rx_desc);
  w.field("tx_desc", p.tx_desc);
  w.text("steering", steering_name(p.steering));
  w.field("tx_copy", std::string(p.tx_copy ? "true" : "false"));
  w.text("udp_checksum", udp_checksum_name(p.udp_checksum));
  w.close();
}

void dump_optimizer(Writer& w, const Optimizer& o) {
  w.open("optimizer");
  w.text("kind", optimizer_name(o.kind));
  w.field("lr", lua_float(o.lr));
  w.field("momentum", lua_float(o.momentum));
  w.field("beta1", lua_float(o.beta1));
  w.field("beta2", lua_float(o.beta2));
  w.field("eps", lua_float(o.eps));
  w.field("weight_decay", lua_float(o.weight_decay));
  w.field("adamw", o.adamw ? "true" : "false");
  w.close();
}

void dump_checkpoints(Writer& w, const char* key, const Checkpoints& k) {
  w.open(key);
  w.text("dir", k.dir);
  w.field("every_rounds", k.every_rounds);
  w.field("every_s", k.every_s);
  w.field("keep", k.keep);
  w.close();
}

void dump_job(Writer& w, const Job& j, Secrets secrets) {
  w.open("");
  w.field("id", j.id);
  w.text("name", j.name);
  w.text("mode", mode_name(j.mode));
  w.text("reduce", reduce_name(j.reduce));
  w.text("dtype", dtype_name(j.dtype));
  w.field("deterministic", j.deterministic ? "true" : "false");
  w.text("nonfinite", j.nonfinite == Nonfinite::refuse ? "refuse" : "pass");
  if (j.worker_ipv4.empty()) {
    w.field("workers", j.workers);
  } else {
    w.list("workers", map_all(j.worker_ipv4, [](uint32_t a) { return lua_string(format_ipv4(a)); }));
  }
  w.field("port_base", j.port_base);
  w.text("secret", secrets == Secrets::redacted && !j.secret.empty() ? std::string(kRedactedSecret) : j.secret);
  w.field("insecure", j.insecure ? "true" : "false");
  w.field("sessions", j.sessions ? "true" : "false");
  w.field("payload_mac", j.payload_mac ? "true" : "false");
  w.field("interface_map", j.interface_map ? "true" : "false");
  w.field("quota_bytes", j.quota_bytes);
  w.field("chunk_bytes", j.chunk_bytes);
  w.open("keys");
  for (const Key& k : j.keys) w.line("{ name = " + lua_string(k.name) + ", elems = " + std::to_string(k.elems) + " },");
  w.close();
  if (j.mode == JobMode::ps) dump_optimizer(w, j.optimizer);
  if (j.mode == JobMode::ps) dump_checkpoints(w, "checkpoint", j.checkpoint);
  w.field("round_modulus", j.round_modulus);
  if (j.shard_count > 1) w.line("shard = { index = " + std::to_string(j.shard_index) + ", count = " +
                                std::to_string(j.shard_count) + " },");
  w.field("rate_limit_pps", j.rate_limit_pps);
  w.field("answer_bytes_per_s", j.answer_bytes_per_s);
  w.list("allowed_sources",
         map_all(j.allowed_sources, [](const Ipv4Prefix& p) { return lua_string(format_ipv4_prefix(p)); }));
  if (!j.ranks_by_rack.empty()) {
    w.open("ranks_by_rack");
    for (const auto& [rack, ranks] : j.ranks_by_rack) {
      w.list("[" + lua_string(rack) + "]", map_all(ranks, [](uint16_t r) { return std::to_string(r); }));
    }
    w.close();
  }
  w.close();
}

void dump_rack(Writer& w, const Rack& r) {
  w.open("");
  w.text("name", r.name);
  w.text("hub_ipv4", format_ipv4(r.hub_ipv4));
  w.field("hub_port_base", r.hub_port_base);
  w.close();
}

}  // namespace

std::string dump_lua(const Config& c, Secrets secrets) {
  Writer w;
  w.line("-- phub config, written by phub::config::dump_lua");
  w.line("return {");
  w.indent();
  w.list("eal_args", map_all(c.eal_args, lua_string));
  w.open("ports");
  for (const Port& p : c.ports) dump_port(w, p);
  w.close();
  w.open("lcores");
  for (const Lcore& l : c.lcores) {
    w.line("{ id = " + std::to_string(l.id) + ", ports = " + lua_list(map_all(l.ports, lua_string)) +
           (l.cross_socket ? ", cross_socket = true" : "") + " },");
  }
  w.close();
  w.integers("polling", {{"idle_polls_before_sleep", c.polling.idle_polls_before_sleep},
                         {"idle_sleep_us", c.polling.idle_sleep_us}});
  w.open("jobs");
  for (const Job& j : c.jobs) dump_job(w, j, secrets);
  w.close();
  w.open("racks");
  for (const Rack& r : c.racks) dump_rack(w, r);
  w.close();
  w.text("rack", c.rack);
  w.integers("timeouts", {{"round_stall_ms", c.timeouts.round_stall_ms},
                          {"drain_ms", c.timeouts.drain_ms},
                          {"secret_overlap_ms", c.timeouts.secret_overlap_ms}});
  w.integers("limits", {{"memory_bytes", c.limits.memory_bytes},
                        {"max_jobs", c.limits.max_jobs},
                        {"mbufs", c.limits.mbufs},
                        {"ring_entries", c.limits.ring_entries},
                        {"arp_icmp_per_s", c.limits.arp_icmp_per_s},
                        {"arp_icmp_burst", c.limits.arp_icmp_burst}});
  w.open("control");
  w.text("socket_path", c.control.socket_path);
  w.field("stats_interval_ms", c.control.stats_interval_ms);
  w.text("metrics_address", c.control.metrics_address);
  w.field("metrics_interval_ms", c.control.metrics_interval_ms);
  w.close();
  dump_checkpoints(w, "checkpoints", c.checkpoints);
  w.close("}");
  return w.take();
}

}  // namespace phub::config

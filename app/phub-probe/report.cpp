// JSON report and the text outputs of a plan.
#include "report.hpp"

#include <cstdio>

#include "phub/base/ipv4.hpp"
#include "phub/base/json_writer.hpp"

namespace phub::probe {
namespace {

template <class Fn>
void matrix_field(JsonWriter& j, std::string_view key, const topo::Matrix& m, Fn value) {
  j.begin_array(key);
  for (size_t i = 0; i < m.size(); ++i) {
    j.begin_array({}, true);
    for (size_t k = 0; k < m.size(); ++k) {
      const topo::PairStats& p = m.at(i, k);
      if (i != k && !p.present) j.null();
      else j.item(i == k ? 0.0 : value(p));
    }
    j.end_array();
  }
  j.end_array();
}

void order_field(JsonWriter& j, std::string_view key, const topo::Matrix& m, const std::vector<size_t>& order) {
  j.begin_array(key, true);
  for (size_t h : order) j.item(m.hosts()[h].name);
  j.end_array();
}

void predicted(JsonWriter& j, const topo::Predicted& p) {
  j.begin_object("predicted_s")
      .value("planned", p.planned_s)
      .value("identity", p.identity_s)
      .value("random_median", p.random_median_s)
      .end_object();
  j.value("speedup_vs_identity", p.identity_s / p.planned_s);
  j.value("speedup_vs_random_median", p.random_median_s / p.planned_s);
}

// A Lua string literal (quotes, backslashes and control characters escaped).
std::string lua_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\" + std::to_string(static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

size_t rank_of(const std::vector<size_t>& ring, size_t host) {
  for (size_t r = 0; r < ring.size(); ++r)
    if (ring[r] == host) return r;
  return ring.size();
}

}  // namespace

std::string rack_name(size_t rack) { return "rack" + std::to_string(rack + 1); }

std::string report_json(const PlanInputs& in) {
  const topo::Matrix& m = in.matrix;
  const topo::Plan& p = in.plan;
  JsonWriter j;
  j.begin_object().value("format", "phub-probe-report").value("version", 1.0);
  j.begin_array("hosts");
  for (size_t i = 0; i < m.size(); ++i) {
    const topo::Host& h = m.hosts()[i];
    j.begin_object().value("name", h.name).value("addr", h.addr).value("port", h.port);
    j.value("group", p.clustering.group[i]).value("confidence", p.clustering.confidence[i]);
    j.value("excluded", p.clustering.group[i] < 0).value("flagged", static_cast<bool>(p.clustering.flagged[i]));
    bool unreachable = false;
    for (size_t u : in.probe.unreachable) unreachable = unreachable || u == i;
    j.value("agent_unreachable", unreachable).value("missing_pairs", m.missing_of(i));
    j.end_object();
  }
  j.end_array();
  j.value("groups", p.clustering.groups).value("separation", p.clustering.separation);
  j.begin_object("matrix");
  matrix_field(j, "rtt_median_us", m, [](const topo::PairStats& s) { return s.median_us; });
  matrix_field(j, "rtt_min_us", m, [](const topo::PairStats& s) { return s.min_us; });
  matrix_field(j, "rtt_p90_us", m, [](const topo::PairStats& s) { return s.p90_us; });
  matrix_field(j, "loss", m, [](const topo::PairStats& s) { return s.loss(); });
  if (m.has_bandwidth()) matrix_field(j, "bw_bytes_per_s", m, [](const topo::PairStats& s) { return s.bw_bytes_per_s; });
  j.end_object();
  j.begin_object("ring");
  order_field(j, "order", m, p.ring);
  j.value("exact", p.ring_exact).value("weight_us", p.ring_weight_us);
  predicted(j, p.ring_cost);
  j.end_object();
  j.begin_object("tree");
  order_field(j, "order", m, p.tree.order);
  j.begin_array("parent_rank", true);
  for (long r : p.tree.parent) j.item(r);
  j.end_array();
  predicted(j, p.tree_cost);
  j.end_object();
  j.begin_array("racks");
  for (size_t r = 0; r < p.racks.members.size(); ++r) {
    j.begin_object().value("name", rack_name(r));
    j.value("hub", m.hosts()[p.racks.hub[r]].name).value("hub_addr", m.hosts()[p.racks.hub[r]].addr);
    order_field(j, "hosts", m, p.racks.members[r]);
    j.begin_array("ranks", true);
    for (size_t h : p.racks.members[r]) j.item(rank_of(p.ring, h));
    j.end_array().end_object();
  }
  j.end_array();
  j.begin_object("model").value("kind", "alpha-beta, uplink shared by transfers leaving a group");
  j.value("bytes", in.options.model_bytes).value("default_bw_bytes_per_s", in.options.default_bw_bytes_per_s);
  j.value("random_orders", in.options.random_orders).end_object();
  if (in.probe.measured) {
    j.begin_object("probe").value("samples_per_pair", in.probe.samples);
    j.value("bandwidth", in.probe.bandwidth).value("wall_s", in.probe.wall_s);
    j.begin_array("unreachable", true);
    for (size_t u : in.probe.unreachable) j.item(m.hosts()[u].name);
    j.end_array().end_object();
  }
  j.end_object();
  return j.str();
}

std::string openmpi_hostfile(const PlanInputs& in) {
  std::string out = "# OpenMPI hostfile planned by phub-probe: line order is rank order (use --map-by node or\n"
                    "# --rankfile semantics with slots=1 so that rank r runs on line r+1).\n";
  for (size_t h : in.plan.ring) out += in.matrix.hosts()[h].addr + " slots=1\n";
  for (size_t i = 0; i < in.matrix.size(); ++i)
    if (in.plan.clustering.group[i] < 0) out += "# excluded (unreachable): " + in.matrix.hosts()[i].addr + "\n";
  return out;
}

std::string rank_map(const PlanInputs& in) {
  std::string out = "# rank name addr group\n";
  for (size_t r = 0; r < in.plan.ring.size(); ++r) {
    const size_t h = in.plan.ring[r];
    out += std::to_string(r) + " " + in.matrix.hosts()[h].name + " " + in.matrix.hosts()[h].addr + " " +
           std::to_string(in.plan.clustering.group[h]) + "\n";
  }
  return out;
}

std::string rank_env(const PlanInputs& in, unsigned master_port) {
  const auto& ring = in.plan.ring;
  if (ring.empty()) return {};
  const std::string master = in.matrix.hosts()[ring[0]].addr, world = std::to_string(ring.size());
  std::string out;
  for (size_t r = 0; r < ring.size(); ++r) {
    const std::string rank = std::to_string(r);
    out += in.matrix.hosts()[ring[r]].name + " RANK=" + rank + " WORLD_SIZE=" + world +
           " LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=" + rank + " NODE_RANK=" + rank + " MASTER_ADDR=" + master +
           " MASTER_PORT=" + std::to_string(master_port) + "\n";
  }
  return out;
}

Expected<void, std::string> hubs_have_addresses(const PlanInputs& in) {
  for (size_t r = 0; r < in.plan.racks.members.size(); ++r) {
    const topo::Host& hub = in.matrix.hosts()[in.plan.racks.hub[r]];
    if (!parse_ipv4_address(hub.addr)) {
      return unexpected(rack_name(r) + "'s hub \"" + hub.name +
                        "\" has no IPv4 address (a CSV matrix names hosts, not addresses): plan from the matrix.txt "
                        "that phub-probe run writes, or name the CSV's hosts by their IPv4 addresses");
    }
  }
  return {};
}

std::string lua_racks(const PlanInputs& in) {
  const topo::Plan& p = in.plan;
  std::string out =
      "-- phub rack grouping planned by phub-probe (" + std::to_string(p.ring.size()) + " hosts, " +
      std::to_string(p.racks.members.size()) + " racks). A hub's config beside this file reads it with\n"
      "--   local plan = include(\"racks.lua\")\n"
      "-- and sets `racks = plan.racks`, `rack = \"<this hub's rack>\"` and, in the job of these hosts,\n"
      "-- `ranks_by_rack = plan.ranks_by_rack`. `hosts_by_rack` names the host of each of those ranks, in the\n"
      "-- same order, for a config's own Lua (a template that places each rack's hub, say): no config field.\n"
      "return {\n  racks = {\n";
  for (size_t r = 0; r < p.racks.members.size(); ++r) {
    out += "    { name = " + lua_string(rack_name(r)) + ", hub_ipv4 = " + lua_string(in.matrix.hosts()[p.racks.hub[r]].addr) +
           " },\n";
  }
  out += "  },\n";
  // One table per rack, keyed by the rack's name: `per_host` gives a host's entry (its rank, its name).
  auto by_rack = [&](const char* title, auto per_host) {
    out += "  " + std::string(title) + " = {\n";
    for (size_t r = 0; r < p.racks.members.size(); ++r) {
      out += "    " + rack_name(r) + " = {";
      for (size_t h : p.racks.members[r]) out += " " + per_host(h) + ",";
      out.back() = ' ';
      out += "},\n";
    }
    out += "  },\n";
  };
  by_rack("ranks_by_rack", [&](size_t h) { return std::to_string(rank_of(p.ring, h)); });
  by_rack("hosts_by_rack", [&](size_t h) { return lua_string(in.matrix.hosts()[h].name); });
  out += "}\n";
  return out;
}

namespace {

// `text` with every `mark` replaced by `by`.
std::string replace_all(std::string_view text, std::string_view mark, std::string_view by) {
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(mark); at != std::string_view::npos; at = text.find(mark, from)) {
    out.append(text.substr(from, at - from)).append(by);
    from = at + mark.size();
  }
  return out.append(text.substr(from));
}

}  // namespace

Expected<std::vector<HubConfig>, std::string> hub_configs(const PlanInputs& in, std::string_view tmpl) {
  if (tmpl.find(kRackMark) == std::string_view::npos) {
    return unexpected(std::string("the hub config template has no ") + kRackMark +
                      " (where each hub's config names its rack)");
  }
  if (auto known = hubs_have_addresses(in); !known) return unexpected("hub configs: " + known.error());
  std::vector<HubConfig> out;
  for (size_t r = 0; r < in.plan.racks.members.size(); ++r) {
    const std::string hub = in.matrix.hosts()[in.plan.racks.hub[r]].addr;
    out.push_back({"hub-" + rack_name(r) + ".lua",
                   replace_all(replace_all(tmpl, kRackMark, lua_string(rack_name(r))), kHubIpv4Mark, lua_string(hub))});
  }
  return out;
}

}  // namespace phub::probe

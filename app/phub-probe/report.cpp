// JSON report and the text outputs of a plan.
#include "report.hpp"

#include <cstdio>

#include "phub/base/ipv4.hpp"
#include "phub/base/json.hpp"

namespace phub::probe {
namespace {

// One row per host; a missing pair is null, the diagonal 0.
template <class Fn>
Json matrix_field(const topo::Matrix& m, Fn value) {
  Json rows = Json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    Json row = Json::array();
    for (size_t k = 0; k < m.size(); ++k) {
      const topo::PairStats& p = m.at(i, k);
      if (i != k && !p.present) row.push_back(nullptr);
      else row.push_back(i == k ? 0.0 : value(p));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Json names_of(const topo::Matrix& m, const std::vector<size_t>& order) {
  Json names = Json::array();
  for (size_t h : order) names.push_back(m.hosts()[h].name);
  return names;
}

void predicted(Json& j, const topo::Predicted& p) {
  j["predicted_s"] = {{"planned", p.planned_s}, {"identity", p.identity_s}, {"random_median", p.random_median_s}};
  j["speedup_vs_identity"] = p.identity_s / p.planned_s;
  j["speedup_vs_random_median"] = p.random_median_s / p.planned_s;
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
  Json j;
  j["format"] = "phub-probe-report";
  j["version"] = 1;
  Json& hosts = j["hosts"] = Json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    const topo::Host& h = m.hosts()[i];
    bool unreachable = false;
    for (size_t u : in.probe.unreachable) unreachable = unreachable || u == i;
    hosts.push_back({{"name", h.name}, {"addr", h.addr}, {"port", h.port}, {"group", p.clustering.group[i]},
                     {"confidence", p.clustering.confidence[i]}, {"excluded", p.clustering.group[i] < 0},
                     {"flagged", static_cast<bool>(p.clustering.flagged[i])}, {"agent_unreachable", unreachable},
                     {"missing_pairs", m.missing_of(i)}});
  }
  j["groups"] = p.clustering.groups;
  j["separation"] = p.clustering.separation;
  Json& matrix = j["matrix"];
  matrix["rtt_median_us"] = matrix_field(m, [](const topo::PairStats& s) { return s.median_us; });
  matrix["rtt_min_us"] = matrix_field(m, [](const topo::PairStats& s) { return s.min_us; });
  matrix["rtt_p90_us"] = matrix_field(m, [](const topo::PairStats& s) { return s.p90_us; });
  matrix["loss"] = matrix_field(m, [](const topo::PairStats& s) { return s.loss(); });
  if (m.has_bandwidth()) matrix["bw_bytes_per_s"] = matrix_field(m, [](const topo::PairStats& s) { return s.bw_bytes_per_s; });
  Json& ring = j["ring"];
  ring["order"] = names_of(m, p.ring);
  ring["exact"] = p.ring_exact;
  ring["weight_us"] = p.ring_weight_us;
  predicted(ring, p.ring_cost);
  Json& tree = j["tree"];
  tree["order"] = names_of(m, p.tree.order);
  tree["parent_rank"] = p.tree.parent;
  predicted(tree, p.tree_cost);
  Json& racks = j["racks"] = Json::array();
  for (size_t r = 0; r < p.racks.members.size(); ++r) {
    Json ranks = Json::array();
    for (size_t h : p.racks.members[r]) ranks.push_back(rank_of(p.ring, h));
    racks.push_back({{"name", rack_name(r)}, {"hub", m.hosts()[p.racks.hub[r]].name},
                     {"hub_addr", m.hosts()[p.racks.hub[r]].addr}, {"hosts", names_of(m, p.racks.members[r])},
                     {"ranks", std::move(ranks)}});
  }
  j["model"] = {{"kind", "alpha-beta, uplink shared by transfers leaving a group"}, {"bytes", in.options.model_bytes},
                {"default_bw_bytes_per_s", in.options.default_bw_bytes_per_s},
                {"random_orders", in.options.random_orders}};
  if (in.probe.measured) {
    j["probe"] = {{"samples_per_pair", in.probe.samples}, {"bandwidth", in.probe.bandwidth},
                  {"wall_s", in.probe.wall_s}, {"unreachable", names_of(m, in.probe.unreachable)}};
  }
  return json_text(std::move(j));
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

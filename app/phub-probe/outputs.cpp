// Output directory writer and the plan summary.
#include "outputs.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "heatmap.hpp"
#include "matrix_io.hpp"

namespace phub::probe {
namespace {

Expected<void, std::string> write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!(f << text) || !f.flush()) return unexpected("cannot write " + path);
  return {};
}

}  // namespace

Expected<std::vector<std::string>, std::string> write_outputs(const std::string& dir, const PlanInputs& in,
                                                              std::string_view hub_template) {
  std::vector<HubConfig> hubs;
  if (!hub_template.empty()) {  // checked before anything is written
    auto rendered = hub_configs(in, hub_template);
    if (!rendered) return unexpected(rendered.error());
    hubs = std::move(*rendered);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return unexpected("cannot create " + dir + ": " + ec.message());
  std::vector<std::pair<const char*, std::string>> texts = {
      {"report.json", report_json(in)}, {"hostfile", openmpi_hostfile(in)}, {"rankmap.txt", rank_map(in)},
      {"rankmap.env", rank_env(in, kMasterPort)}, {"matrix.txt", format_matrix(in.matrix)},
  };
  if (auto known = hubs_have_addresses(in)) {
    texts.emplace_back("racks.lua", lua_racks(in));
  } else {  // a file no hub config could load is worse than none
    std::fprintf(stderr, "phub-probe: racks.lua not written: %s\n", known.error().c_str());
  }
  std::vector<std::string> written;
  for (const auto& [name, text] : texts) {
    const std::string path = dir + "/" + name;
    if (auto ok = write_file(path, text); !ok) return unexpected(ok.error());
    written.push_back(path);
  }
  for (const HubConfig& hub : hubs) {
    const std::string path = dir + "/" + hub.file;
    if (auto ok = write_file(path, hub.text); !ok) return unexpected(ok.error());
    written.push_back(path);
  }
  const std::string png = dir + "/heatmap.png";
  if (auto ok = write_png(png, render_heatmap(in.matrix, in.plan)); !ok) return unexpected(ok.error());
  written.push_back(png);
  return written;
}

std::string summary(const PlanInputs& in) {
  const topo::Plan& p = in.plan;
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%d locality group(s), separation %.2fx, ring plan %s\n", p.clustering.groups,
                p.clustering.separation, p.ring_exact ? "exact" : "heuristic");
  out += buf;
  for (size_t r = 0; r < p.racks.members.size(); ++r) {
    out += "  " + rack_name(r) + " (hub " + in.matrix.hosts()[p.racks.hub[r]].name + "):";
    for (size_t h : p.racks.members[r]) {
      std::snprintf(buf, sizeof buf, " %s[%.2f]%s", in.matrix.hosts()[h].name.c_str(), p.clustering.confidence[h],
                    p.clustering.flagged[h] ? "!" : "");
      out += buf;
    }
    out += "\n";
  }
  for (size_t i = 0; i < in.matrix.size(); ++i)
    if (p.clustering.group[i] < 0) out += "  excluded (unreachable): " + in.matrix.hosts()[i].name + "\n";
  std::snprintf(buf, sizeof buf,
                "predicted ring allreduce of %.0f MiB: planned %.4g s, given order %.4g s (%.2fx), random median %.4g s "
                "(%.2fx)\n",
                in.options.model_bytes / 1048576.0, p.ring_cost.planned_s, p.ring_cost.identity_s,
                p.ring_cost.identity_s / p.ring_cost.planned_s, p.ring_cost.random_median_s,
                p.ring_cost.random_median_s / p.ring_cost.planned_s);
  out += buf;
  return out;
}

}  // namespace phub::probe

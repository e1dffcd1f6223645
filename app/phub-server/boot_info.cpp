// --print-boot-info: the config's EAL arguments, memory budget and port devices as JSON (read by tools/phub-boot).
#include "boot_info.hpp"

#include "phub/base/json.hpp"

namespace phub::server {

std::string boot_info_json(const config::Config& cfg, const std::vector<std::string>& eal_args,
                           const engine::MemoryBudget& budget, const NumaFacts& machine) {
  Json out;
  out["eal_args"] = eal_args;
  out["memory_bytes"] = budget.total_bytes();
  Json& sockets = out["memory_sockets"] = Json::array();
  for (const auto& share : budget.sockets) {
    sockets.push_back({{"socket", share.socket}, {"bytes", share.total_bytes()}});
  }
  out["numa_nodes"] = machine.nodes;
  Json& ports = out["ports"] = Json::array();
  for (const auto& p : cfg.ports) ports.push_back({{"name", p.name}, {"device", p.device}});
  return json_text(std::move(out));
}

}  // namespace phub::server

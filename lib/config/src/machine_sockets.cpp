// Lcore and port sockets from the EAL arguments and sysfs, before the EAL starts.
#include "phub/config/machine_sockets.hpp"

#include <set>

#include "phub/base/eal_args.hpp"
#include "phub/config/numa_placement.hpp"

namespace phub::config {
namespace {

std::string cpu_text(const std::vector<unsigned>& cpus) {
  std::string out = cpus.size() == 1 ? "cpu " : "cpus ";
  for (size_t i = 0; i < cpus.size(); ++i) out += (i == 0 ? "" : ",") + std::to_string(cpus[i]);
  return out;
}

}  // namespace

std::vector<std::string> port_pci_addresses(const Config& cfg) {
  std::vector<std::string> out;
  for (const auto& p : cfg.ports) {
    if (auto addr = pci_address(p.device)) out.push_back(std::move(*addr));
  }
  return out;
}

Expected<MachineSockets, std::string> machine_sockets(const Config& cfg, const std::vector<std::string>& eal_args,
                                                      const NumaFacts& facts) {
  auto mapped = lcore_cpus(eal_args);
  if (!mapped) return unexpected(mapped.error());
  MachineSockets s;
  for (const auto& l : cfg.lcores) {
    std::vector<unsigned> cpus{l.id};  // without -l, -c or --lcores: lcore i on CPU i
    if (*mapped) {
      const auto at = (*mapped)->find(l.id);
      if (at == (*mapped)->end()) {
        s.lcore_sockets.push_back(kAnySocket);
        s.lcore_why.push_back("not enabled by eal_args");
        continue;
      }
      cpus = at->second;
    }
    std::set<int> nodes;
    for (const unsigned c : cpus) nodes.insert(facts.cpu_node(c));
    std::string why = cpu_text(cpus);
    if (nodes.contains(-1)) {
      why += ", not a CPU of this machine's nodes";
    } else if (nodes.size() > 1) {
      why += ", on " + std::to_string(nodes.size()) + " nodes";
    }
    s.lcore_sockets.push_back(nodes.size() == 1 ? *nodes.begin() : kAnySocket);
    s.lcore_why.push_back(std::move(why));
  }
  for (const auto& p : cfg.ports) {
    const auto addr = pci_address(p.device);
    if (!addr) {
      s.port_sockets.push_back(kAnySocket);
      s.port_why.emplace_back("a virtual device");
      continue;
    }
    const auto at = facts.pci_node.find(*addr);
    s.port_sockets.push_back(at == facts.pci_node.end() ? kAnySocket : at->second);
    s.port_why.push_back(*addr + (at == facts.pci_node.end() ? ", not on this machine"
                                  : at->second < 0     ? ", numa_node -1"
                                                       : ""));
  }
  return s;
}

std::string MachineSockets::describe(const Config& cfg) const {
  std::string out = "memory: sockets (sysfs):";
  for (size_t i = 0; i < lcore_sockets.size(); ++i) {
    out += (i == 0 ? " lcore " : ", lcore ") + std::to_string(cfg.lcores[i].id) + " on " +
           Placement::socket_name(lcore_sockets[i]) + " (" + lcore_why[i] + ")";
  }
  for (size_t p = 0; p < port_sockets.size(); ++p) {
    out += (p == 0 ? "; port " : ", port ") + cfg.ports[p].name + " on " + Placement::socket_name(port_sockets[p]) +
           " (" + port_why[p] + ")";
  }
  return out;
}

}  // namespace phub::config

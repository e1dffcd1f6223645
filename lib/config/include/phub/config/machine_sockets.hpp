// The sockets of a config's lcores and ports before the EAL starts (docs/hardware.md, "Hugepages"), for
// the memory budget per socket that `phub-server --check` prints and the start checks. Pure: from the
// config, its EAL arguments and what sysfs says (phub/base/numa_sysfs.hpp reads it). The EAL reports the
// same at start (rte_lcore_to_socket_id, rte_eth_dev_socket_id), and config::place_memory takes either.
// - An lcore's socket is the node of the CPUs the EAL arguments run it on (-l, -c, --lcores; lcore i on
//   CPU i without them), as the EAL sets it: unknown where its CPUs are on several nodes, or on none
//   (a CPU this machine does not have), or where the arguments do not enable the lcore.
// - A port's socket is its PCI device's numa_node; unknown for a virtual device, a PCI address this machine
//   does not have, or a numa_node of -1.
#pragma once

#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/base/numa_sysfs.hpp"
#include "phub/config/config.hpp"

namespace phub::config {

struct MachineSockets {
  std::vector<int> lcore_sockets;  // by lcore index; kAnySocket (-1) where unknown
  std::vector<int> port_sockets;   // by port index; kAnySocket where unknown
  std::vector<std::string> lcore_why, port_why;  // by index: where each came from ("cpu 2", "a virtual device")

  // "memory: sockets (sysfs): lcore 1 on socket 0 (cpu 2), ...; port nic0 on socket 1 (0000:af:00.0), ..."
  [[nodiscard]] std::string describe(const Config& cfg) const;
};

// The error is an EAL argument that says which lcores run, and says it wrong.
[[nodiscard]] Expected<MachineSockets, std::string> machine_sockets(const Config& cfg,
                                                                    const std::vector<std::string>& eal_args,
                                                                    const NumaFacts& facts);

// The PCI addresses of the config's ports (pci_address), for read_numa_facts.
[[nodiscard]] std::vector<std::string> port_pci_addresses(const Config& cfg);

}  // namespace phub::config

// What sysfs says about the machine's NUMA nodes, read before the EAL starts: the server's memory budget
// per socket (phub/engine/budget.hpp) needs the sockets of its lcores and ports, and the hugepages of each
// node, where `phub-server --check` has no EAL to ask. Reading is the only I/O here;
// phub/config/machine_sockets.hpp maps what was read onto a config.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace phub {

// The hugepages free now, of every page size.
struct FreeHugepages {
  std::optional<uint64_t> total_bytes;  // <sys>/kernel/mm/hugepages; none where the kernel has no hugepages
  std::map<int, uint64_t> node_bytes;   // by node, <sys>/devices/system/node/node<N>/hugepages; empty without
};

struct NumaFacts {
  std::vector<int> nodes;                          // the node<N> directories, ascending; empty without NUMA in sysfs
  std::map<int, std::vector<unsigned>> node_cpus;  // node -> its CPUs (node<N>/cpulist); empty without NUMA in sysfs
  std::map<std::string, int> pci_node;  // each PCI address asked for that this machine has -> its numa_node
                                        // (-1: the kernel does not know)
  FreeHugepages free_hugepages;
  // The node of `cpu`, or -1 where no node lists it (a CPU this machine does not have).
  [[nodiscard]] int cpu_node(unsigned cpu) const;
};

// "0000:3b:00.0" for a port device that names a PCI function ("3b:00.0" or "0000:3b:00.0", devargs after a
// comma allowed, as the EAL takes them), lower case with its domain; none for anything else (a virtual device).
[[nodiscard]] std::optional<std::string> pci_address(std::string_view device);

// Reads under `sys_root` ("/sys"; a test gives a tree of its own): each node's cpulist and free hugepages,
// the free hugepages in all, and the numa_node of each of `pci_addresses` (as pci_address writes them) under
// bus/pci/devices. A file that is missing or unreadable leaves its part out.
[[nodiscard]] NumaFacts read_numa_facts(const std::filesystem::path& sys_root,
                                        const std::vector<std::string>& pci_addresses);

}  // namespace phub

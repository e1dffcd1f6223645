// Reading the NUMA nodes, the free hugepages and the PCI devices' nodes from sysfs.
#include "phub/base/numa_sysfs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <limits>
#include <system_error>

#include "phub/base/eal_args.hpp"

namespace phub {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// The number after `prefix` in a directory name ("node1" -> 1, "hugepages-2048kB" with suffix "kB" -> 2048).
std::optional<uint64_t> number_in(std::string_view name, std::string_view prefix, std::string_view suffix) {
  if (!name.starts_with(prefix) || !name.ends_with(suffix) || name.size() == prefix.size() + suffix.size()) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

// Free bytes of the hugepages-<size>kB directories under `dir`; none where `dir` has none.
std::optional<uint64_t> free_hugepages_in(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return std::nullopt;
  uint64_t total = 0;
  for (const auto& entry : it) {
    const auto kib = number_in(entry.path().filename().string(), "hugepages-", "kB");
    if (!kib) continue;
    const auto pages = first_line(entry.path() / "free_hugepages");
    uint64_t n = 0;
    if (pages && std::from_chars(pages->data(), pages->data() + pages->size(), n).ec == std::errc()) {
      total += n * *kib * 1024;
    }
  }
  return total;
}

bool is_hex(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

int NumaFacts::cpu_node(unsigned cpu) const {
  for (const auto& [node, cpus] : node_cpus) {
    if (std::binary_search(cpus.begin(), cpus.end(), cpu)) return node;
  }
  return -1;
}

std::optional<std::string> pci_address(std::string_view device) {
  std::string_view name = device.substr(0, device.find(','));
  // [dddd:]bb:dd.f
  std::string domain = "0000";
  if (std::count(name.begin(), name.end(), ':') == 2) {
    domain = std::string(name.substr(0, 4));
    if (name.size() < 5 || name[4] != ':' || !is_hex(domain)) return std::nullopt;
    name.remove_prefix(5);
  }
  if (name.size() != 7 || name[2] != ':' || name[5] != '.' || !is_hex(name.substr(0, 2)) ||
      !is_hex(name.substr(3, 2)) || name[6] < '0' || name[6] > '7') {
    return std::nullopt;
  }
  std::string out = domain + ":" + std::string(name);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

NumaFacts read_numa_facts(const fs::path& sys_root, const std::vector<std::string>& pci_addresses) {
  NumaFacts facts;
  std::error_code ec;
  fs::directory_iterator it(sys_root / "devices/system/node", ec);
  if (!ec) {
    for (const auto& entry : it) {
      const auto node = number_in(entry.path().filename().string(), "node", "");
      if (!node || *node > static_cast<uint64_t>(std::numeric_limits<int>::max())) continue;
      const int n = static_cast<int>(*node);
      facts.nodes.push_back(n);
      // A node without CPUs (memory only) has an empty cpulist.
      const auto list = first_line(entry.path() / "cpulist");
      if (list && !list->empty()) {
        if (auto cpus = parse_cpu_list(*list)) facts.node_cpus[n] = std::move(*cpus);
      }
      if (auto free_bytes = free_hugepages_in(entry.path() / "hugepages")) {
        facts.free_hugepages.node_bytes[n] = *free_bytes;
      }
    }
  }
  std::sort(facts.nodes.begin(), facts.nodes.end());
  facts.free_hugepages.total_bytes = free_hugepages_in(sys_root / "kernel/mm/hugepages");
  for (const auto& addr : pci_addresses) {
    const fs::path dir = sys_root / "bus/pci/devices" / addr;
    if (!fs::exists(dir, ec)) continue;
    int node = -1;
    if (const auto text = first_line(dir / "numa_node")) {
      int v = -1;
      if (std::from_chars(text->data(), text->data() + text->size(), v).ec == std::errc() && v >= 0) node = v;
    }
    facts.pci_node[addr] = node;
  }
  return facts;
}

}  // namespace phub

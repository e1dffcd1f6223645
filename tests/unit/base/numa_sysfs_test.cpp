// Reading NUMA nodes, free hugepages and PCI devices' nodes from a sysfs tree (phub/base/numa_sysfs.hpp):
// a fake tree of two nodes, one of a node without hugepages, and this machine's own /sys.
#include "phub/base/numa_sysfs.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace phub {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1ull << 20;

class FakeSys {
 public:
  FakeSys() {
    std::string path = (fs::temp_directory_path() / "phub-numa-sysfs-XXXXXX").string();
    if (mkdtemp(path.data()) == nullptr) ADD_FAILURE() << "mkdtemp";
    root_ = path;
  }
  ~FakeSys() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeSys(const FakeSys&) = delete;
  FakeSys& operator=(const FakeSys&) = delete;

  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  [[nodiscard]] const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

TEST(PciAddress, FunctionsWithAndWithoutDomain) {
  EXPECT_EQ(pci_address("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(pci_address("3B:00.1,rxq_cqe_comp_en=0"), "0000:3b:00.1");
  EXPECT_EQ(pci_address("0001:af:1f.7"), "0001:af:1f.7");
  for (const char* other : {"net_ring0", "net_af_packet0,iface=phub0", "3b:00.8", "3b:0.1", "000:3b:00.0",
                            "0000-3b:00.0", "g0:00.0", "", "class=eth,mac=02:00:00:00:00:01"}) {
    EXPECT_EQ(pci_address(other), std::nullopt) << other;
  }
}

TEST(NumaSysfs, TwoNodesTheirCpusHugepagesAndDevices) {
  FakeSys sys;
  sys.write("devices/system/node/node0/cpulist", "0-3,8-11\n");
  sys.write("devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages", "512\n");
  sys.write("devices/system/node/node0/hugepages/hugepages-1048576kB/free_hugepages", "1\n");
  sys.write("devices/system/node/node1/cpulist", "4-7,12-15\n");
  sys.write("devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages", "1024\n");
  sys.write("devices/system/node/possible", "0-1\n");  // not a node directory
  sys.write("kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "1536\n");
  sys.write("kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", "1\n");
  sys.write("bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
  sys.write("bus/pci/devices/0000:af:00.0/numa_node", "1\n");
  sys.write("bus/pci/devices/0000:5e:00.0/numa_node", "-1\n");
  const NumaFacts f = read_numa_facts(sys.root(), {"0000:3b:00.0", "0000:af:00.0", "0000:5e:00.0", "0000:01:00.0"});
  EXPECT_EQ(f.nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.cpu_node(9), 0);
  EXPECT_EQ(f.cpu_node(12), 1);
  EXPECT_EQ(f.cpu_node(16), -1);
  EXPECT_EQ(f.pci_node, (std::map<std::string, int>{{"0000:3b:00.0", 0}, {"0000:af:00.0", 1}, {"0000:5e:00.0", -1}}));
  EXPECT_EQ(f.free_hugepages.total_bytes, 3072 * kMiB + 1024 * kMiB);
  EXPECT_EQ(f.free_hugepages.node_bytes, (std::map<int, uint64_t>{{0, 2048 * kMiB}, {1, 2048 * kMiB}}));
}

TEST(NumaSysfs, AnEmptyTreeKnowsNothing) {
  FakeSys sys;
  const NumaFacts f = read_numa_facts(sys.root(), {"0000:3b:00.0"});
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_TRUE(f.node_cpus.empty());
  EXPECT_TRUE(f.pci_node.empty());
  EXPECT_EQ(f.free_hugepages.total_bytes, std::nullopt);
  EXPECT_TRUE(f.free_hugepages.node_bytes.empty());
  EXPECT_EQ(f.cpu_node(0), -1);
}

TEST(NumaSysfs, AMemoryOnlyNodeHasNoCpus) {
  FakeSys sys;
  sys.write("devices/system/node/node0/cpulist", "0-1\n");
  sys.write("devices/system/node/node2/cpulist", "\n");
  sys.write("devices/system/node/node2/hugepages/hugepages-2048kB/free_hugepages", "0\n");
  const NumaFacts f = read_numa_facts(sys.root(), {});
  EXPECT_EQ(f.nodes, (std::vector<int>{0, 2}));
  EXPECT_EQ(f.node_cpus.size(), 1u);
  EXPECT_EQ(f.free_hugepages.node_bytes, (std::map<int, uint64_t>{{2, 0}}));
}

// This machine: every CPU this process may run on is on some node (a kernel with NUMA in sysfs lists node0).
TEST(NumaSysfs, ThisMachine) {
  const NumaFacts f = read_numa_facts("/sys", {});
  if (f.nodes.empty()) {
    GTEST_SKIP() << "no NUMA nodes in /sys";
  }
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mine)) {
      EXPECT_GE(f.cpu_node(c), 0) << "cpu " << c;
    }
  }
}

}  // namespace
}  // namespace phub

// One EAL for the whole test binary: --no-huge --no-pci, a per-process file prefix, three lcores on two CPUs.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <unistd.h>

#include <string>
#include <vector>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string prefix = "--file-prefix=phub-test-engine-" + std::to_string(getpid());
  std::vector<std::string> args = {"test-dpdk-engine", "--no-huge", "--no-pci", "-m", "512",
                                   prefix,             "--lcores",  "(0-2)@(0,1)", "--log-level=lib.eal:error",
                                   "--no-telemetry"};
  std::vector<char*> argv_eal;
  for (auto& a : args) argv_eal.push_back(a.data());
  if (rte_eal_init(static_cast<int>(argv_eal.size()), argv_eal.data()) < 0) {
    std::fprintf(stderr, "EAL init failed\n");
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  rte_eal_cleanup();
  return rc;
}

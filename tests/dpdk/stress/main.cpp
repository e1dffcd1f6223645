// The stress binary: its own arguments (options.hpp), one EAL for the whole run (--no-huge --no-pci, a file
// prefix of its own, lcores 0-2 on the two CPUs), the gtest case.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "options.hpp"
#include "phub/base/eal_args.hpp"
#include "phub/drivers/eal.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto parsed = phub::stress::parse_options(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parsed.error().c_str());
    return 2;
  }
  phub::stress::options() = *parsed;
  std::vector<std::string> eal_args = {"--no-huge", "--no-pci", "-m", "512", "--lcores", "(0-2)@(0,1)",
                                       "--log-level=lib.eal:error", "--no-telemetry"};
  phub::add_file_prefix(eal_args, "phub-test-dpdk-stress");
  auto eal = phub::drivers::Eal::start("test-dpdk-stress", eal_args);
  if (!eal) {
    std::fprintf(stderr, "%s\n", eal.error().c_str());
    return 1;
  }
  return RUN_ALL_TESTS();  // the EAL is cleaned up (its runtime directory removed) as `eal` goes
}

// The stress binary: its own arguments (options.hpp), one EAL for the whole run (init_eal), the gtest case.
#include <gtest/gtest.h>

#include <cstdio>

#include "harness.hpp"
#include "options.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto parsed = phub::stress::parse_options(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parsed.error().c_str());
    return 2;
  }
  phub::stress::options() = *parsed;
  if (!phub::test::init_eal("test-dpdk-stress")) return 1;
  const int rc = RUN_ALL_TESTS();
  phub::test::cleanup_eal();
  return rc;
}

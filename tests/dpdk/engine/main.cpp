// One EAL for the whole test binary (see init_eal), then the gtest cases.
#include <gtest/gtest.h>

#include "harness.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!phub::test::init_eal("test-dpdk-engine")) return 1;
  const int rc = RUN_ALL_TESTS();
  phub::test::cleanup_eal();
  return rc;
}

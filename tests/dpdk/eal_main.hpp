// The main() of a DPDK test binary: one EAL around all of its tests, with a --file-prefix of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "phub/drivers/eal.hpp"

namespace phub::test {

// Runs the binary's tests inside an EAL started with `eal_args` plus "--file-prefix=<program>-<pid>". Every
// test closes its ports and pools before the EAL is cleaned up.
inline int run_tests_in_eal(int argc, char** argv, std::string_view program, std::vector<std::string> eal_args) {
  ::testing::InitGoogleTest(&argc, argv);
  add_file_prefix(eal_args, program);
  auto eal = drivers::Eal::start(program, eal_args);
  if (!eal) {
    std::fprintf(stderr, "%s\n", eal.error().c_str());
    return 1;
  }
  return RUN_ALL_TESTS();
}

}  // namespace phub::test

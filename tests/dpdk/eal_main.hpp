// The main() of a DPDK test binary: one EAL around all of its tests, with a --file-prefix of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <rte_malloc.h>

#include "phub/drivers/eal.hpp"

namespace phub::test {

// Bytes the EAL's malloc heap on socket 0 held when the EAL had started and no test had run: the EAL's own
// tables and the vdevs' (what the memory budget's "EAL" item stands for).
inline uint64_t& heap_after_eal_bytes() {
  static uint64_t bytes = 0;
  return bytes;
}

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
  rte_malloc_socket_stats st{};
  if (rte_malloc_get_socket_stats(0, &st) == 0) heap_after_eal_bytes() = st.heap_allocsz_bytes;
  return RUN_ALL_TESTS();
}

}  // namespace phub::test

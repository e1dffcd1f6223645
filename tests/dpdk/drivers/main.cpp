// One EAL for the test binary: --no-huge --no-pci, a per-process file prefix, one lcore.
#include "eal_main.hpp"

int main(int argc, char** argv) {
  return phub::test::run_tests_in_eal(argc, argv, "phub-test-drivers",
                                      {"--no-huge", "--no-pci", "-m", "64", "-l", "0", "--log-level=lib.eal:error",
                                       "--no-telemetry"});
}

// One EAL for the whole test binary: --no-huge --no-pci, a per-process file prefix, four lcores on two CPUs (three hubs in the hierarchy tests).
#include "eal_main.hpp"

int main(int argc, char** argv) {
  return phub::test::run_tests_in_eal(argc, argv, "phub-test-engine",
                                      {"--no-huge", "--no-pci", "-m", "512", "--lcores", "(0-3)@(0,1)",
                                       "--log-level=lib.eal:error", "--no-telemetry"});
}

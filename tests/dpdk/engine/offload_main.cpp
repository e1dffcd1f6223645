// The offload tests' EAL, in a network namespace of the process's own: the tap interface they make (and
// anything the kernel does on it) lives and goes with the process, whatever way it ends. IPv6 is off there,
// so that the kernel sends nothing of its own on that interface.
#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "eal_main.hpp"

namespace {

bool write_sysctl(const char* path, const char* value) {
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs(value, f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (unshare(CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "offload tests: cannot make a network namespace (%s); they need root\n", std::strerror(errno));
    return 1;
  }
  for (const char* p : {"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
    if (!write_sysctl(p, "1")) std::fprintf(stderr, "offload tests: cannot write %s; continuing\n", p);
  }
  return phub::test::run_tests_in_eal(argc, argv, "phub-test-offload",
                                      {"--no-huge", "--no-pci", "-m", "256", "--lcores", "(0-1)@(0,1)",
                                       "--log-level=lib.eal:error", "--no-telemetry"});
}

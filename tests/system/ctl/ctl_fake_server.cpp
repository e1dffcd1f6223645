// A control socket with the unit tests' fake handler behind it, for phub-ctl's system test:
// ctl-fake-server SOCKET [SLOW_DRAIN_MS]. Prints "ready" once it listens; runs until SIGTERM/SIGINT.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fake_handler.hpp"
#include "phub/ctl/server.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: ctl-fake-server SOCKET [SLOW_DRAIN_MS]\n");
    return 64;
  }
  phub::ctl::test::FakeHandler handler;
  if (argc == 3) handler.slow_drain = std::chrono::milliseconds(std::atoi(argv[2]));
  auto server = phub::ctl::ControlServer::open(argv[1], handler);
  if (!server) {
    std::fprintf(stderr, "ctl-fake-server: %s\n", server.error().c_str());
    return 1;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::printf("ready\n");
  std::fflush(stdout);
  while (!g_stop) (*server)->poll_once(std::chrono::milliseconds(20));
  return 0;
}

// `phub-probe agent`: answers probes and, when the coordinator asks, probes a peer.
#pragma once

#include <atomic>
#include <string>

#include "phub/topo/matrix.hpp"

namespace phub::probe {

// Serves until `stop` is set: the probe transport's reflector on UDP ADDR:PORT and the control protocol
// (control.hpp) on TCP ADDR:PORT. Returns a process exit code.
[[nodiscard]] int run_agent(const topo::Host& listen, const std::atomic<bool>& stop);

}  // namespace phub::probe

// `phub-probe agent`: answers probes and, when the coordinator asks, probes a peer.
#pragma once

#include <atomic>
#include <string>

#include "phub/topo/matrix.hpp"
#include "transport.hpp"

namespace phub::probe {

// Serves until `stop` is set: the transport's reflector on its endpoint (kernel UDP ADDR:PORT, or the DPDK
// port) and the control protocol (control.hpp) on TCP `listen`, to peers that prove they know `token`
// (auth.hpp), within the limits of control.hpp. Returns a process exit code.
[[nodiscard]] int run_agent(const topo::Host& listen, ProbeTransport& t, const std::string& token,
                            const std::atomic<bool>& stop);

}  // namespace phub::probe

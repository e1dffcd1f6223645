// The DPDK probe transport's options and factory. This header needs no DPDK: without DPDK in the build the
// factory reports that the path is unavailable, so the agent's command line is the same everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "phub/base/expected.hpp"
#include "transport.hpp"

namespace phub::probe {

struct DpdkAgentOptions {
  std::string eal_args;         // one string, split at whitespace: "--no-huge --no-pci -m 128 --file-prefix p1"
  std::string port_devargs;     // "net_af_packet0,iface=eth1", "0000:3b:00.0", ...
  std::string ipv4_cidr;        // the port's own address: "198.18.0.11/24"
  std::string gateway;          // next hop for peers outside the prefix (empty: on-link peers only)
  uint16_t udp_port = 0;        // probe port on the DPDK address (0: the agent's control port)
  // Between empty polls the poller sleeps in slices of this length, except around the next probe request
  // it expects and while a reply is due soon (see dpdk_transport.cpp). 0: busy-poll all the time.
  unsigned idle_sleep_us = 100;
};

// Starts the EAL, opens the port and returns a transport whose reflect() polls it. Only one per process.
[[nodiscard]] Expected<std::unique_ptr<ProbeTransport>, std::string> make_dpdk_transport(const DpdkAgentOptions& o);

}  // namespace phub::probe

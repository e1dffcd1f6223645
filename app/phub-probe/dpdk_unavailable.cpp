// The DPDK probe transport in a build without DPDK: the option is parsed everywhere, and refused here.
#include "dpdk_transport.hpp"

namespace phub::probe {

Expected<std::unique_ptr<ProbeTransport>, std::string> make_dpdk_transport(const DpdkAgentOptions&) {
  return unexpected(std::string("this phub-probe was built without DPDK (meson -Ddpdk=enabled to get --dpdk)"));
}

}  // namespace phub::probe

// rte_flow steering: one rule per lcore mapping its UDP port to its queue.
#include <rte_flow.h>

#include "phub/drivers/eth_port.hpp"

namespace phub::drivers {

Expected<void, std::string> EthPort::steer_udp_port(uint32_t dst_ip, uint16_t udp_port, uint16_t queue) {
  rte_flow_attr attr{};
  attr.ingress = 1;

  rte_flow_item_ipv4 ip_spec{}, ip_mask{};
  ip_spec.hdr.dst_addr = rte_cpu_to_be_32(dst_ip);
  ip_mask.hdr.dst_addr = UINT32_MAX;
  rte_flow_item_udp udp_spec{}, udp_mask{};
  udp_spec.hdr.dst_port = rte_cpu_to_be_16(udp_port);
  udp_mask.hdr.dst_port = UINT16_MAX;

  rte_flow_item pattern[4]{};
  pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
  pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
  pattern[1].spec = &ip_spec;
  pattern[1].mask = &ip_mask;
  pattern[2].type = RTE_FLOW_ITEM_TYPE_UDP;
  pattern[2].spec = &udp_spec;
  pattern[2].mask = &udp_mask;
  pattern[3].type = RTE_FLOW_ITEM_TYPE_END;

  rte_flow_action_queue q{};
  q.index = queue;
  rte_flow_action actions[2]{};
  actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
  actions[0].conf = &q;
  actions[1].type = RTE_FLOW_ACTION_TYPE_END;

  rte_flow_error error{};
  if (rte_flow_validate(id_, &attr, pattern, actions, &error) != 0) {
    return unexpected("port " + name_ + ": rte_flow rule for UDP port " + std::to_string(udp_port) + " refused: " +
                      (error.message ? error.message : "no reason given"));
  }
  if (rte_flow_create(id_, &attr, pattern, actions, &error) == nullptr) {
    return unexpected("port " + name_ + ": rte_flow create for UDP port " + std::to_string(udp_port) + " failed: " +
                      (error.message ? error.message : "no reason given"));
  }
  ++flows_;
  return {};
}

void EthPort::flush_flows() noexcept {
  if (flows_ == 0 || id_ >= RTE_MAX_ETHPORTS) return;
  rte_flow_error error{};
  (void)rte_flow_flush(id_, &error);
  flows_ = 0;
}

}  // namespace phub::drivers

// A received frame on its way through the lcore's handlers (private to lib/engine).
#pragma once

#include <rte_mbuf.h>

#include <span>

#include "phub/engine/lcore.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {

struct Lcore::Rx {
  rte_mbuf* m = nullptr;
  std::span<std::byte> frame;
  uint16_t port = 0;  // port index
  proto::L2 l2;
  proto::Ipv4 ip;
  proto::Udp udp;
  proto::Header hdr;
  bool previous_key = false;           // the tag matched the job's previous secret (a rotation's overlap)
  std::span<const std::byte> msg;      // the UDP payload: phub header + payload
  std::span<const std::byte> payload;  // elements
};

}  // namespace phub::engine

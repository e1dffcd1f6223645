// A received frame on its way through the lcore's handlers (private to lib/engine).
#pragma once

#include <rte_mbuf.h>

#include <span>

#include "phub/engine/lcore_job.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {

struct RxFrame {
  rte_mbuf* m = nullptr;
  std::span<std::byte> frame;
  uint16_t port = 0;  // port index
  proto::L2 l2;
  proto::Ipv4 ip;
  proto::Udp udp;
  proto::Header hdr;
  bool previous_key = false;           // the tag matched the job's previous secret (a rotation's overlap)
  // The rank whose unproven address this frame came from and was credited to (null: none): a reply to
  // the frame spends that credit like every other message to the address.
  Peer* credited = nullptr;
  // Sessions jobs: the session the packet opened under (the rank's current, or its former one whose packets
  // only learn of a new epoch); answers to the packet are sealed under it and go to its address.
  PeerSession* session = nullptr;
  proto::JoinPayload join{};            // a join's payload (checked): the worker's nonce, a confirm's challenge
  uint32_t redirect_ipv4 = 0;           // the gate answers the join with a redirect there (GateAnswer::redirect)
  std::span<const std::byte> msg;      // the UDP payload: phub header + payload
  std::span<const std::byte> payload;  // elements
};

}  // namespace phub::engine

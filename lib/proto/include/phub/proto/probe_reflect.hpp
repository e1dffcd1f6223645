// The probe reflector (no DPDK): a received probe_request turned, in place, into the probe_reply that goes
// back to its sender. Shared by the probe agent's DPDK station and kernel-UDP path, and by the server.
#pragma once

#include <cstddef>
#include <span>

#include "phub/base/mac.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/header.hpp"

namespace phub::proto {

// The reply's header: the request's with opcode probe_reply and no CRC (flag and field cleared), because a
// reflector may write its turnaround time into the body. Sequence number, job, epoch and aux (the prober's
// nonce) are kept.
[[nodiscard]] Header probe_reply_header(const Header& request) noexcept;

// Send the UDP datagram in `frame` back where it came from, in place: Ethernet destination the sender's MAC,
// source `my_mac`; IPv4 addresses swapped, TTL 64, header checksum recomputed; UDP ports swapped, checksum 0
// (none, legal over IPv4). VLAN tags and IPv4 options stay as they are; lengths are unchanged.
void turn_around_udp_in_place(std::span<std::byte> frame, const L2& l2, const Ipv4& ip, const Udp& udp,
                              const MacAddr& my_mac) noexcept;

// Both: the probe_request `f` parsed from `frame` becomes its probe_reply from `my_mac`. Returns the header
// written (the caller may rewrite it, e.g. to sign it).
Header reflect_probe_in_place(std::span<std::byte> frame, const PhubFrame& f, const MacAddr& my_mac) noexcept;

}  // namespace phub::proto

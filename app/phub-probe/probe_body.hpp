// The body of probe_request/probe_reply datagrams (after lib/proto's header), shared by every transport.
//   0 send stamp u64 (the prober's clock, echoed)  |  8 nonce u64 (echoed)
//  16 turnaround_ns u64: 0 from the prober; a reflector that timestamps its own receive and send (the DPDK
//     path) writes the time it held the request, so that the prober can subtract it. Kernel reflectors
//     echo the body unchanged, so the field stays 0 and the RTT is taken as is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "phub/base/bytes.hpp"

namespace phub::probe {

inline constexpr size_t kBodyStampOffset = 0;
inline constexpr size_t kBodyNonceOffset = 8;
inline constexpr size_t kBodyTurnaroundOffset = 16;
inline constexpr size_t kMinBodyBytes = 24;
inline constexpr size_t kMaxBodyBytes = 1024;

// The RTT left after removing the reflector's reported turnaround (ignored when it is not smaller).
[[nodiscard]] constexpr uint64_t net_rtt_ns(uint64_t raw_ns, uint64_t turnaround_ns) noexcept {
  return turnaround_ns < raw_ns ? raw_ns - turnaround_ns : raw_ns;
}

// The same, with the turnaround read from an echoed body.
[[nodiscard]] inline uint64_t subtract_turnaround(uint64_t raw_ns, std::span<const std::byte> body) noexcept {
  if (body.size() < kMinBodyBytes) return raw_ns;
  return net_rtt_ns(raw_ns, load_be<uint64_t>(body.data() + kBodyTurnaroundOffset));
}

}  // namespace phub::probe

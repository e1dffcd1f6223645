// The agent's control protocol (TCP, one text line per command and reply).
//   HELLO                                  -> OK phub-probe 1 <transport> <probe_addr>:<probe_port>
//   PROBE <addr> <port> <count> <interval_us> <timeout_us> <payload_bytes> <give_up_after>
//                                          -> SAMPLES <sent> <rtt_ns>...
//   BULK <addr> <port> <bytes>             -> BW <bytes_per_s>   (a timed SINK to that agent)
//   SINK <bytes> then <bytes> raw bytes    -> OK                 (from another agent)
//   anything else, or a failure            -> ERR <reason>
#pragma once

#include <string>

namespace phub::probe {

inline constexpr const char* kProtocolGreeting = "OK phub-probe 1";

}  // namespace phub::probe

// Offline traces (no EAL): --write-pcap writes K complete rounds of every job's workers as a classic
// microsecond pcap for replay (real Pktgen-DPDK, or DPDK's net_pcap rx_pcap); --verify-pcap checks the
// results a server wrote to a pcap (net_pcap tx_pcap) against the expected values.
#pragma once

#include <cstdint>
#include <string>

#include "record.hpp"
#include "target.hpp"

namespace phub::pktgen {

struct TraceOptions {
  std::string path;
  uint32_t rounds = 2;         // K: rounds per job in the file
  uint32_t worker_ip = 0;      // first worker address (0: next to the server)
  MacAddr src_mac{0x02, 0x70, 0x67, 0x00, 0x00, 0x01};
};

// Returns a summary record (frames, bytes, the server counters one replay must produce), or an error.
[[nodiscard]] Expected<Record, std::string> write_trace(const Target& t, const TraceOptions& o);
[[nodiscard]] Expected<Record, std::string> verify_trace(const Target& t, const std::string& path);

}  // namespace phub::pktgen

// Classic pcap files, through libpcap: a writer of the microsecond format (magic 0xa1b2c3d4, link type
// Ethernet), which real Pktgen-DPDK replays, and a reader of both the microsecond and the nanosecond
// (0xa1b23c4d) formats (DPDK's net_pcap writes the latter) with Ethernet frames.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "phub/base/expected.hpp"

struct pcap;  // libpcap's handles (pcap_t, pcap_dumper_t)
struct pcap_dumper;

namespace phub::gen {

inline constexpr uint32_t kPcapMagicUs = 0xa1b2c3d4;
inline constexpr uint32_t kPcapMagicNs = 0xa1b23c4d;
inline constexpr uint32_t kLinktypeEthernet = 1;

class PcapWriter {
 public:
  [[nodiscard]] static Expected<PcapWriter, std::string> create(const std::string& path, uint32_t snaplen = 65535);
  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(PcapWriter&& o) noexcept { *this = std::move(o); }
  PcapWriter& operator=(PcapWriter&& o) noexcept;
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // One frame with a timestamp in microseconds; a frame longer than the snap length is refused.
  [[nodiscard]] Expected<void, std::string> write(std::span<const std::byte> frame, uint64_t ts_us);
  [[nodiscard]] Expected<void, std::string> close();
  [[nodiscard]] uint64_t frames() const noexcept { return frames_; }

 private:
  pcap* pcap_ = nullptr;  // a "dead" handle: the link type and snap length the file is written with
  pcap_dumper* dump_ = nullptr;
  uint64_t frames_ = 0;
  uint32_t snaplen_ = 0;
};

struct PcapFrame {
  uint64_t ts_ns = 0;
  std::vector<std::byte> data;
};

struct PcapFile {
  uint32_t magic = 0;  // as written (after byte-order detection): kPcapMagicUs or kPcapMagicNs
  uint32_t linktype = 0;
  uint32_t snaplen = 0;  // no frame is longer (libpcap cuts longer records to it)
  std::vector<PcapFrame> frames;
};

// A whole file's bytes (either byte order); the error names `what` (the path). A file of another link type than
// Ethernet, or with a truncated record, is refused.
[[nodiscard]] Expected<PcapFile, std::string> parse_pcap(std::span<const std::byte> bytes, const std::string& what);
[[nodiscard]] Expected<PcapFile, std::string> read_pcap(const std::string& path);

}  // namespace phub::gen

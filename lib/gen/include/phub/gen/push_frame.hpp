// Building the frames of emulated workers' pushes (Ethernet/IPv4/UDP + phub header + payload), shared by
// the DPDK generator and the pcap trace writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "phub/base/mac.hpp"
#include "phub/gen/partition.hpp"
#include "phub/gen/slots.hpp"
#include "phub/gen/workload.hpp"
#include "phub/proto/frame.hpp"

namespace phub::gen {

// Where a job's emulated workers live: rank r sends from (ip_base + r, port_base + r), or from rank_ips[r]
// when the job pins each rank to an address.
struct WorkerAddrs {
  MacAddr src_mac{};
  MacAddr server_mac{};
  uint32_t server_ip = 0;    // host order
  uint32_t ip_base = 0;      // host order
  uint16_t port_base = 20000;
  std::vector<uint32_t> rank_ips;

  [[nodiscard]] uint32_t ip_of(uint16_t rank) const noexcept {
    return rank < rank_ips.size() ? rank_ips[rank] : ip_base + rank;
  }
  // Whether `ip` is the address of one of ranks 0..workers-1 (what an ARP request may ask this generator for):
  // each rank's own, pinned or consecutive, and no address between two pinned ones.
  [[nodiscard]] bool is_rank_ip(uint32_t ip, uint16_t workers) const noexcept {
    if (rank_ips.empty()) return ip >= ip_base && ip - ip_base < workers;
    for (uint16_t r = 0; r < workers; ++r) {
      if (ip_of(r) == ip) return true;
    }
    return false;
  }
  // The addresses of a packet from `rank` to the server's UDP port `server_port`.
  [[nodiscard]] proto::FlowAddrs flow(uint16_t rank, uint16_t server_port) const noexcept {
    proto::FlowAddrs f;
    f.src_mac = src_mac;
    f.dst_mac = server_mac;
    f.src_ip = ip_of(rank);
    f.dst_ip = server_ip;
    f.src_port = static_cast<uint16_t>(port_base + rank);
    f.dst_port = server_port;
    return f;
  }
};

// The payload of a push order: a gradient pattern, or (init) rank 0's fp32 initial weights.
[[nodiscard]] std::span<const std::byte> push_payload(const Workload& wl, const Slot& slot, const PushOrder& o) noexcept;

// Write the 96 header bytes of a push (the payload follows them on the wire), in the job's epoch on the
// owning server lcore. Signs the header when the job has a secret and no sessions (a session job's sender
// seals it: proto::seal_session_header); sets the crc flag and CRC when the job asks for it.
void write_push_headers(const Workload& wl, const WorkerAddrs& a, const Slot& slot, const PushOrder& o, uint32_t seq,
                        std::span<std::byte, proto::kFrameHeadersBytes> out) noexcept;
// Rewrite, in headers that write_push_headers wrote for an original whole-segment push, what differs for
// another original whole-segment push of the same rank and payload pattern: the UDP destination port (the
// owning server lcore), its epoch there, round, chunk, element offset, sequence number, and the tag. The headers then equal
// what write_push_headers writes for `o`.
void patch_push_headers(const Workload& wl, const Slot& slot, const PushOrder& o, uint32_t seq,
                        std::span<std::byte, proto::kFrameHeadersBytes> out) noexcept;

// What follows a push's elements: the tail naming the job's hyperparameter set (Workload::push_tail), or nothing.
[[nodiscard]] std::span<const std::byte> push_tail(const Workload& wl, const PushOrder& o) noexcept;

// A whole frame into `out` (at least kFrameHeadersBytes + payload bytes + tail); returns its length.
[[nodiscard]] size_t write_push_frame(const Workload& wl, const WorkerAddrs& a, const Slot& slot, const PushOrder& o,
                                      uint32_t seq, std::span<std::byte> out) noexcept;

// The hparams message that registers the job's set (Workload::hparams) with server lcore `owner`, from rank 0's
// address; returns its length (0: `out` too small).
[[nodiscard]] size_t write_hparams_frame(const Workload& wl, const WorkerAddrs& a, uint16_t owner, uint32_t seq,
                                         std::span<std::byte> out) noexcept;

}  // namespace phub::gen

// Client settings in C++ form, their defaults, and the validation phub_connect applies to them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phub/base/dtype.hpp"
#include "phub/client/error.hpp"

namespace phub::client {

enum class Mode : uint8_t { allreduce, ps };

// Faults the client injects into its own traffic (tests), in parts per million of packets.
struct Faults {
  uint32_t drop_tx_ppm = 0;
  uint32_t drop_rx_ppm = 0;
  uint32_t dup_tx_ppm = 0;
  uint32_t reorder_tx_ppm = 0;  // held back and sent after the next batch
  uint64_t seed = 0;
  [[nodiscard]] bool any() const noexcept { return drop_tx_ppm + drop_rx_ppm + dup_tx_ppm + reorder_tx_ppm != 0; }
};

struct Options {
  std::vector<uint32_t> servers;  // IPv4, host order; several for a sharded job
  uint16_t port_base = 0;
  uint16_t server_lcores = 1;     // worker lcores per server
  uint32_t job_id = 0;
  uint16_t rank = 0;
  uint16_t workers = 0;
  std::string secret;             // empty: no authentication
  uint32_t chunk_bytes = 32768;
  uint16_t mtu = 1500;            // IP MTU
  Mode mode = Mode::allreduce;
  Dtype dtype = Dtype::fp32;
  bool mean = false;              // allreduce: the job reduces by mean
  uint32_t round_modulus = 0;
  uint32_t timeout_ms = 10000;    // deadline of each operation
  uint32_t rto_initial_us = 200000;
  uint32_t rto_min_us = 10000;
  uint32_t rto_max_us = 1000000;
  uint32_t window_packets = 512;
  uint32_t delay_target_us = 2000;  // queueing delay the window aims at; 0: loss-based window
  uint32_t bind_ipv4 = 0;         // host order; 0 = any
  uint16_t bind_port = 0;
  bool gso = true;
  bool gro = true;
  bool crc = false;
  bool restart_job = true;        // rank 0: start a new epoch of the job (its rounds restart); false: join the current one
  bool fresh_weights = false;     // with restart_job in a ps job: the server forgets the weights (rank 0 inits again)
  bool interface_map = true;      // send a server lcore's chunks to the address its joined answer names (the job's
                                  // chunk-to-interface map); false: to the server address given, always
  uint32_t run_token = 0;         // shared by the ranks of one run (0: none): the other ranks join only the
                                  // epoch that rank 0 of this run started
  uint32_t socket_buffer_bytes = 4u << 20;
  Faults faults;
};

inline constexpr uint32_t kMinWindowPackets = 8;

// Servers x lcores: the owners of the chunk map.
[[nodiscard]] inline uint32_t owner_count(const Options& o) noexcept {
  return static_cast<uint32_t>(o.servers.size()) * o.server_lcores;
}

// "198.18.0.1" or "198.18.0.1,198.18.0.2" (spaces allowed) into host-order addresses.
[[nodiscard]] Result<std::vector<uint32_t>> parse_servers(std::string_view text);
// One IPv4 address (phub::parse_ipv4_address) with blanks around it allowed, into a host-order address.
[[nodiscard]] Result<uint32_t> parse_address(std::string_view text);

// Checks every field; the message names the field and the allowed range.
[[nodiscard]] Expected<void, Error> validate(const Options& o);

}  // namespace phub::client

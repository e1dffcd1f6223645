// The server the generator drives, as the generator sees it: its jobs, lcores, address and MTU, taken from
// the server's own Lua config or from --job descriptions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/gen/job_spec.hpp"

namespace phub::pktgen {

using MacAddr = std::array<uint8_t, 6>;

struct TargetJob {
  gen::JobSpec spec;
  std::vector<uint32_t> rank_ips;  // the job pins rank r to rank_ips[r] (host order); empty: free
  uint32_t source_net = 0;         // first allowed source prefix (host order), 0: none
  uint8_t source_prefix = 0;
};

struct Target {
  std::vector<TargetJob> jobs;
  uint16_t server_lcores = 1;
  uint32_t server_ip = 0;          // host order
  std::optional<MacAddr> server_mac;
  uint16_t mtu = 1500;
};

// Jobs, lcores and the first port's address of a phub-server Lua config (validated as the server does).
[[nodiscard]] Expected<Target, std::string> target_from_config(const std::string& path);

// A job from "id=1,workers=8,keys=1000000+4096,dtype=bf16,mode=ps,optimizer=adam,..." (see --help).
[[nodiscard]] Expected<gen::JobSpec, std::string> parse_job(const std::string& text, uint16_t server_lcores);

[[nodiscard]] Expected<uint32_t, std::string> parse_ipv4(const std::string& text);
[[nodiscard]] Expected<MacAddr, std::string> parse_mac(const std::string& text);
[[nodiscard]] std::string ipv4_text(uint32_t ip);

}  // namespace phub::pktgen

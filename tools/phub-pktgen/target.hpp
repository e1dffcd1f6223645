// The server the generator drives, as the generator sees it: its jobs, lcores, address and MTU, taken from
// the server's own Lua config or from --job descriptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/base/mac.hpp"
#include "phub/gen/job_spec.hpp"

namespace phub::pktgen {

struct TargetJob {
  gen::JobSpec spec;
  std::vector<uint32_t> rank_ips;  // the job pins rank r to rank_ips[r] (host order); empty: free
  uint32_t source_net = 0;         // first allowed source prefix (host order), 0: none
  uint8_t source_prefix = 0;
};

struct Target {
  std::vector<TargetJob> jobs;
  uint16_t server_lcores = 1;
  // The server lcores this generator drives (by position in the server's lcores list), in order: its queue k
  // serves owners[k % queues]. All of them unless --owners restricts it (driven_owners fills it in).
  std::vector<uint16_t> owners;
  uint32_t server_ip = 0;          // host order
  std::optional<MacAddr> server_mac;
  uint16_t mtu = 1500;
};

// Jobs, lcores and the first port's address of a phub-server Lua config (validated as the server does).
[[nodiscard]] Expected<Target, std::string> target_from_config(const std::string& path);

// The server lcores a generator drives: `given` (--owners), checked against the server's lcore count, or all of
// them when nothing is given. Refuses an owner that is not one of the server's lcores, and one given twice.
[[nodiscard]] Expected<std::vector<uint16_t>, std::string> driven_owners(const std::vector<uint16_t>& given,
                                                                         uint16_t server_lcores);

// The first address of a job's emulated workers: `next` (the next free one); but when the job admits only a
// source prefix that `next` is outside of, and no worker address was given, address .100 of that prefix.
[[nodiscard]] uint32_t first_worker_ip(const TargetJob& j, uint32_t next, bool worker_ip_given);

// A job from "id=1,workers=8,keys=1000000+4096,dtype=bf16,mode=ps,optimizer=adam,..." (see --help).
[[nodiscard]] Expected<gen::JobSpec, std::string> parse_job(const std::string& text, uint16_t server_lcores);

}  // namespace phub::pktgen

// Everything about a job that stays the same while it runs: its chunk map, arithmetic, keys and limits.
// No DPDK: a plan is computed from the config alone, and a reload compares and replaces plans.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "phub/agg/kernels.hpp"
#include "phub/base/expected.hpp"
#include "phub/config/config.hpp"
#include "phub/engine/chunk.hpp"
#include "phub/engine/memory.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/layout.hpp"

namespace phub::engine {

struct HubPlan;  // hierarchy.hpp

// Which gate a job's packets pass (lib/engine/src/gate.hpp).
enum class GateMode : uint8_t {
  open,      // no secret: a join's payload is checked, nothing is tagged
  job_key,   // every packet carries the job key's tag; a join the handshake's
  sessions,  // a join carries the handshake's tag, a hub forward the job key's; a rank's other packets are
             // session packets, opened by the owner (its window and payload MAC); another lcore checks
             // their tag on the owner's session board before it hands them over
};

struct JobPlan {
  config::Job cfg;
  proto::Layout layout;
  JobMath math;
  proto::AuthKey key;
  bool authenticated = false;  // the job has a secret: every packet must carry its tag
  GateMode gate = GateMode::open;
  // A rotated secret: packets tagged with the previous key are still accepted until previous_until_tsc.
  proto::AuthKey previous_key;
  uint64_t previous_until_tsc = 0;  // 0: no previous key
  // The keys of join and joined tags (proto::handshake_key of key and previous_key): computed once here, as
  // every join is checked under them.
  proto::AuthKey handshake_key;
  proto::AuthKey previous_handshake_key;
  uint16_t lcores = 1;         // lcores of this server
  uint32_t state_piece_elems = 0;  // ps: fp32 elements per piece of a state pull or init (with its tail)
  uint16_t first_owner = 0;    // layout owner of this server's lcore 0 (sharded jobs: shard_index * lcores)
  uint64_t rate_per_lcore_pps = 0;
  uint64_t answer_bytes_per_lcore_s = 0;  // the job's answer_bytes_per_s, this lcore's share (0: unlimited)
  JobMemory memory;            // the admission estimate
  // A hierarchical job's place in the racks (docs/hierarchy.md); null for a flat job. Shared by the copies
  // of the plan: math.hub points into it.
  std::shared_ptr<const HubPlan> hub;
};

// The plan of `job` for `lcores` lcores (times the job's shards: the layout's owners) and an IP MTU of
// `mtu`. Refuses a job over its quota.
[[nodiscard]] Expected<JobPlan, std::string> plan_job(const config::Job& job, uint16_t lcores, uint16_t mtu,
                                                      const agg::Kernels& kernels);

// Refuses, with the message admission gives, a plan whose memory estimate is over the job's quota.
[[nodiscard]] Expected<void, std::string> check_quota(const JobPlan& plan);

// "job 'name' (id N)", for messages.
[[nodiscard]] std::string job_label(const config::Job& j);

}  // namespace phub::engine

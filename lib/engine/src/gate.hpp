// The gate of a job's packets (docs/server.md, "The gate"): what a phub packet must be before any handler of
// the job sees it. Chosen per job at plan time (open, job key or sessions), it decides from the parsed
// header, the UDP payload, the source address, the job's plan and the clock alone: no DPDK, no I/O, no
// state. It runs once per frame, on the lcore that received it, before a hand-off; the owner takes the
// verdict the frame carries (docs/server.md, "Hand-offs"). Private to lib/engine; unit-tested without an
// EAL (tests/unit/engine/gate_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "phub/engine/counters.hpp"
#include "phub/engine/job_plan.hpp"
#include "phub/engine/session_board.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/header.hpp"

namespace phub::engine {

// A phub packet as the gate reads it.
struct GatePacket {
  const proto::Header& hdr;         // parsed from msg
  std::span<const std::byte> msg;   // the UDP payload: phub header, then the payload
  uint32_t src_ipv4 = 0;            // host order
};

// What the gate answers itself, for a packet that passed, instead of passing it on to the owner's handler.
enum class GateAnswer : uint8_t {
  none,
  // A join for another lcore, in a job with the chunk-to-interface map, that reached another port than that
  // lcore's home, from a worker that follows the map (flag follows_map): answered where it arrived with the
  // home's address (a joined with session_option::redirect) instead of handed over.
  redirect,
};

// What the gate decided. A packet that passed reaches the handler of its opcode, or is answered as `answer`
// says; one that did not is dropped for `drop`, counted against the job.
struct GateVerdict {
  Drop drop = Drop::count_;      // the reason; count_: passed
  bool previous_key = false;     // its tag (or a join's handshake) is the job's previous secret's (a rotation)
  proto::JoinPayload join{};     // a join's payload, checked
  GateAnswer answer = GateAnswer::none;
  uint32_t redirect_ipv4 = 0;    // answer redirect: the address to join (host order)
  [[nodiscard]] bool passed() const noexcept { return drop == Drop::count_; }
};

// Where the gate runs.
struct GateSite {
  bool owner = true;                          // on the lcore that owns the packet's chunks
  const SessionBoard* owner_board = nullptr;  // elsewhere (sessions mode): the owner's session board of the job
  // Elsewhere, in a job with the chunk-to-interface map: the address of the owner's home port when the frame
  // reached another port (0: it reached the home, or the job has no map).
  uint32_t owner_home_ipv4 = 0;
};

// The verdict on `p`, whose header names the job of `plan`, at `now_tsc` (a rotated secret's previous key
// is accepted until plan.previous_until_tsc).
[[nodiscard]] GateVerdict gate_job_packet(const GatePacket& p, const JobPlan& plan, uint64_t now_tsc,
                                          GateSite site) noexcept;

// The verdict on `p`, received on a UDP port of the job of `plan`. A header that names another job is
// dropped: unknown_job when `job_exists(id)` is false (no job of this server has that id), else
// job_port_mismatch.
template <class JobExists>
[[nodiscard]] GateVerdict gate_packet(const GatePacket& p, const JobPlan& plan, uint64_t now_tsc, GateSite site,
                                      const JobExists& job_exists) noexcept {
  if (p.hdr.job_id != plan.cfg.id) {
    return GateVerdict{.drop = job_exists(p.hdr.job_id) ? Drop::job_port_mismatch : Drop::unknown_job};
  }
  return gate_job_packet(p, plan, now_tsc, site);
}

}  // namespace phub::engine

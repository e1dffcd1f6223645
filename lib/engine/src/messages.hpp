// Headers of the messages the lcores send, shared by the result and forward paths (private to lib/engine).
#pragma once

#include <cstdint>
#include <span>

#include "phub/engine/chunk.hpp"
#include "phub/engine/job_plan.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/header.hpp"

namespace phub::engine {

// The header of result segment `seg` of chunk `c`'s buffer out[buf], labelled `round`, for `rank` (seq not
// set); flag::nonfinite when that buffer's round was skipped.
[[nodiscard]] proto::Header result_header(const JobPlan& plan, const Chunk& c, int buf, uint32_t round, uint32_t seg,
                                          uint16_t rank, uint16_t epoch);

// Every result a worker gets carries a checksum of its payload (docs/protocol.md, "Results"): the crc flag and
// the payload's CRC32C, which the header's tag then covers. A session with payload MACs puts its MAC in the
// same field when it seals the header. Hub messages carry a MAC instead and never take this.
inline void checksum_result(proto::Header& h, std::span<const std::byte> payload) noexcept {
  h.flags = static_cast<uint16_t>(h.flags | proto::flag::crc);
  h.crc32c = proto::crc32c(payload);
}

}  // namespace phub::engine

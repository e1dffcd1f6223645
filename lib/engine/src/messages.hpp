// Headers of the messages the lcores send, shared by the result and forward paths (private to lib/engine).
#pragma once

#include <cstdint>

#include "phub/engine/chunk.hpp"
#include "phub/engine/job_plan.hpp"
#include "phub/proto/header.hpp"

namespace phub::engine {

// The header of result segment `seg` of chunk `c`'s buffer out[buf], labelled `round`, for `rank` (seq not
// set); flag::nonfinite when that buffer's round was skipped.
[[nodiscard]] proto::Header result_header(const JobPlan& plan, const Chunk& c, int buf, uint32_t round, uint32_t seg,
                                          uint16_t rank, uint16_t epoch);

}  // namespace phub::engine

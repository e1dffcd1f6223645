// What the control thread asks of an lcore that a snapshot swap cannot say (drain a job, reset its
// rounds), as in DPDK's ip_pipeline: a request goes down the lcore's request ring, the lcore acts on it
// between two bursts and sends it back on its response ring.
#pragma once

#include <cstdint>

namespace phub::engine {

enum class RequestKind : uint8_t {
  drain,  // the job starts no new round on this lcore (rounds in progress complete)
  reset,  // the job's chunks start again at round 0 in the next epoch (workers must restart); undrains it
};

struct Request {
  RequestKind kind = RequestKind::drain;
  uint32_t job_id = 0;
  bool found = false;  // set by the lcore: the job is in its snapshot
};

}  // namespace phub::engine

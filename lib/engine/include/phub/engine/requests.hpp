// What the control thread asks of an lcore that a snapshot swap cannot say (drain a job, reset its
// rounds), as in DPDK's ip_pipeline: a request goes down the lcore's request ring, the lcore acts on it
// between two bursts and sends it back on its response ring.
#pragma once

#include <cstdint>

namespace phub::engine {

struct CheckpointCapture;

enum class RequestKind : uint8_t {
  drain,  // the job starts no new round on this lcore (rounds in progress complete)
  reset,  // the job's chunks start again at round 0 in the next epoch (workers must restart); undrains it
  capture,  // copy each chunk's state after round `round` into `capture`, now or at that round's boundary
  detach,   // forget `capture` (done, failed or given up): the lcore no longer touches it
};

struct Request {
  RequestKind kind = RequestKind::drain;
  uint32_t job_id = 0;
  bool found = false;  // set by the lcore: the job is in its snapshot
  // capture, detach:
  CheckpointCapture* capture = nullptr;
  uint32_t round = 0;
};

}  // namespace phub::engine

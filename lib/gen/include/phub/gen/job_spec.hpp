// What the generator knows about one job: the fields of the server's job config that shape its traffic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/dtype.hpp"

namespace phub::gen {

enum class Mode : uint8_t { allreduce, ps };

// How the emulated gradients are chosen (see values.hpp).
enum class Values : uint8_t {
  exact,            // small integers: every sum is exact, whatever the order
  order_sensitive,  // values of very different magnitudes: the fp32 sum depends on the order (rank order expected)
};

struct JobSpec {
  uint32_t id = 1;
  std::string name = "job";
  Mode mode = Mode::allreduce;
  bool mean = false;               // allreduce (and ps gradient) reduced by mean: fp32(sum) * fp32(1/workers)
  bool deterministic = false;      // the server sums in rank order
  Dtype dtype = Dtype::fp32;
  uint16_t workers = 2;
  std::vector<uint64_t> key_elems;
  uint32_t chunk_bytes = 32768;
  uint16_t server_lcores = 1;      // owners of the chunk map: lcore i listens on port_base + i
  uint16_t port_base = 40000;
  uint32_t round_modulus = 0;      // 0: rounds wrap at 2^32
  std::string secret;              // empty: no authentication
  // With a secret: every rank joins every server lcore (the session handshake) and seals its packets under
  // the session's keys instead of signing them with the job key (docs/protocol.md, "Sessions"); with
  // payload_mac, pushes carry the payload MAC too. The generator does the handshake (the trace writer cannot).
  bool sessions = false;
  bool payload_mac = false;
  agg::OptimizerParams optimizer;  // ps mode (step and grad_scale are set per update)
  Values values = Values::exact;
  bool crc = false;                // set the crc flag and the payload CRC32C on pushes
  // ps: register a hyperparameter set with the job's own optimizer values and name it in the tail of every
  // push (what PSOptimizer sends: docs/protocol.md, "Hyperparameters"); the results are the same.
  bool hparams = false;
};

// Short text for logs: "job 'name' (id 1): allreduce mean, 8 workers, bf16, 1000000 elems".
[[nodiscard]] std::string describe(const JobSpec& s);

}  // namespace phub::gen

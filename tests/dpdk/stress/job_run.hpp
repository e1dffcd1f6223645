// Everything the stress test keeps about one job of an epoch: its shape and chunk map, the values its
// ranks push, the model of its results, its ranks' progress, and the tally of what was sent and received.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "model.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/layout.hpp"
#include "progress.hpp"
#include "rounds.hpp"
#include "shape.hpp"
#include "values.hpp"

namespace phub::stress {

// What the emulated workers of one job sent and received (checked against the server's counters).
struct JobTally {
  uint64_t push_packets = 0;      // push frames on the wire: first pushes, duplicates, late, early, resent
  uint64_t retransmit_flags = 0;  // frames on the wire with the retransmit flag
  uint64_t rerequests = 0;
  uint64_t pulls = 0;
  uint64_t init_packets = 0;
  uint64_t results = 0;           // result frames received
  uint64_t errors = 0;            // error frames received
  std::array<uint64_t, proto::kStatusMax + 1> errors_by_status{};
  uint64_t pushes_lost = 0, results_lost = 0, results_held = 0, stalls = 0;
};

struct JobRun {
  JobRun(uint64_t seed, uint64_t epoch, uint32_t index, const JobShape& shape, uint16_t lcores);

  uint32_t index;  // in the epoch's job list
  const JobShape& shape;
  proto::Layout layout;
  PushValues values;
  Model model;
  proto::AuthKey key{};
  JobProgress progress;
  JobTally tally;
  // Each rank's address cookie, from the answer to its join (0: not yet). Every push, init, rerequest and
  // pull carries it, as a worker's client does, so the server answers them in full.
  std::vector<uint32_t> cookies;
  // Jobs that are not bit-exact: the first copy of each (chunk, round, segment) received; every later
  // copy must be the same bytes.
  std::map<std::tuple<uint32_t, int64_t, uint32_t>, std::vector<std::byte>> first_seen;

  [[nodiscard]] bool ps() const noexcept { return shape.job.mode == config::JobMode::ps; }
  [[nodiscard]] const proto::AuthKey* signing_key() const noexcept { return shape.job.secret.empty() ? nullptr : &key; }
  [[nodiscard]] uint32_t label(int64_t round) const noexcept { return round_label(round, shape.job.round_modulus); }
};

}  // namespace phub::stress

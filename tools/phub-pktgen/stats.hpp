// Counters summed over the generator lcores at one moment, and what two such moments say about a run:
// the summary record, the live progress line and the human-readable report.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "generator.hpp"
#include "phub/gen/counters.hpp"
#include "record.hpp"
#include "settings.hpp"

namespace phub::pktgen {

struct JobTotals {
  uint64_t pushes = 0, originals = 0, push_bytes = 0, dropped = 0, duplicated = 0, retransmits = 0, inits = 0;
  uint64_t results = 0, results_ok = 0, mismatches = 0, results_dup = 0, results_unexpected = 0, unverifiable = 0;
  uint64_t first_results = 0, goodput_bytes = 0, results_lost = 0;
  uint64_t rounds = 0;  // rounds every worker completed (the slowest partition's worker rounds / workers)
  std::array<uint64_t, proto::kStatusMax + 1> errors{};
};

struct Totals {
  double t_s = 0;  // when (steady clock)
  uint64_t tx_packets = 0, tx_bytes = 0, tx_full = 0, rx_packets = 0, rx_bytes = 0, rx_echo = 0, rx_echo_bytes = 0;
  uint64_t rx_malformed = 0, rx_bad_tag = 0, rx_replayed = 0, rx_unknown_job = 0, rx_other = 0, handed_off = 0, no_mbuf = 0;
  uint64_t recycled = 0, recycle_busy = 0;
  uint64_t loops = 0, idle_loops = 0;
  std::array<uint64_t, gen::kFaultCount> faults{};
  std::vector<JobTotals> jobs;
  gen::Histogram::Snapshot round_ns{};
  [[nodiscard]] JobTotals all() const;  // summed over jobs
};

[[nodiscard]] Totals collect(const Generator& g);

// The summary of a run: rates over [start, stop], loss at the end of the drain, everything else (results,
// mismatches, retransmissions, settling) over the whole step.
struct StepTimes {
  const Totals& start;
  const Totals& stop;     // sending stopped
  const Totals& drained;  // open loop: after the drain (== stop for the closed loop)
  const Totals& settled;  // after settling
  bool settled_ok = true;
};
[[nodiscard]] Record summarize(const Generator& g, const RunSettings& s, const StepTimes& t);

// One line of live progress between two moments.
[[nodiscard]] std::string progress_line(const Totals& prev, const Totals& cur, double elapsed_s);
// A few lines for people.
[[nodiscard]] std::string human_summary(const Record& step);

}  // namespace phub::pktgen

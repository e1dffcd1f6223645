// Counter checks after an epoch (see counters_check.hpp).
#include "counters_check.hpp"

#include <algorithm>
#include <set>
#include <sstream>

namespace phub::stress {
namespace {

class Mismatches {
 public:
  void equal(const std::string& what, uint64_t server, uint64_t expected) {
    if (server != expected) o_ << "\n    " << what << ": server " << server << ", schedule " << expected;
  }
  void within(const std::string& what, uint64_t server, uint64_t lo, uint64_t hi) {
    if (server < lo || server > hi) o_ << "\n    " << what << ": server " << server << ", schedule " << lo << ".." << hi;
  }
  [[nodiscard]] std::string text() const { return o_.str(); }

 private:
  std::ostringstream o_;
};

// How many frames of a job the server drops for `d`: only what the schedule provokes is answered with an
// error (round_behind, round_ahead where a modulus aliases, not_initialized); nothing else.
uint64_t provoked(engine::Drop d, const JobTally& t) {
  const auto errors = [&](proto::Status s) { return t.errors_by_status[static_cast<size_t>(s)]; };
  switch (d) {
    case engine::Drop::round_behind: return errors(proto::Status::round_behind);
    case engine::Drop::round_ahead: return errors(proto::Status::round_ahead);
    case engine::Drop::not_initialized: return errors(proto::Status::not_initialized);
    default: return 0;
  }
}

// Drops the engine decides under load, not the schedule: advance_pending (a chunk's advance waits for a free
// result buffer), and handoff_share_full (a misdirected frame finds its job's share of the hand-off ring to
// the owning lcore full: that lcore was off its CPU for tens of ms on this shared machine, seen at 81 ms).
// The schedule resends both; the frames it sent count for at most what the server saw.
bool engine_decides(engine::Drop d) {
  return d == engine::Drop::advance_pending || d == engine::Drop::handoff_share_full;
}

void check_job(const engine::JobCounters& c, const JobRun& j, Mismatches& m) {
  const std::string p = "job [" + std::to_string(j.index) + "] ";
  // Frames shed before the owning lcore counted them (their flags, their kind).
  const uint64_t shed = c.drops[static_cast<size_t>(engine::Drop::handoff_share_full)];
  const auto at_most = [&](const std::string& what, uint64_t server, uint64_t scheduled) {
    m.within(what, server, scheduled - std::min(scheduled, shed), scheduled);
  };
  const JobTally& t = j.tally;
  uint64_t segments = 0;
  for (const auto& ci : j.layout.chunks()) segments += ci.segments;
  const uint64_t rounds = j.shape.rounds;
  const uint64_t workers = j.shape.job.workers;
  m.equal(p + "rounds_completed", c.rounds_completed, j.layout.chunk_count() * rounds);
  m.equal(p + "segments_completed", c.segments_completed, segments * rounds);
  m.equal(p + "pushes (contributions counted)", c.pushes, segments * workers * rounds);
  // Every push frame was counted once, as a contribution, a duplicate, or refused with an error.
  const auto& e = t.errors_by_status;
  // advance_pending: pushes the server dropped without an answer while a chunk's advance waited for a
  // free result buffer (the schedule resends them); the engine decides those, not the schedule.
  const uint64_t advance_drops = c.drops[static_cast<size_t>(engine::Drop::advance_pending)];
  const uint64_t deferred_drops = advance_drops + shed;
  const uint64_t refused = e[static_cast<size_t>(proto::Status::round_behind)] +
                           e[static_cast<size_t>(proto::Status::round_ahead)] +
                           e[static_cast<size_t>(proto::Status::not_initialized)] + deferred_drops;
  m.within(p + "pushes + duplicates", c.pushes + c.duplicates, t.push_packets - std::min(t.push_packets, refused),
           t.push_packets);
  at_most(p + "retransmits_seen", c.retransmits_seen, t.retransmit_flags);
  at_most(p + "rerequests", c.rerequests, t.rerequests);
  at_most(p + "pulls", c.pulls, t.pulls);
  if (j.ps()) m.within(p + "inits (before the first update)", c.inits, segments, t.init_packets);
  m.equal(p + "results_sent (every one received)", c.results_sent, t.results);
  m.equal(p + "errors_sent (every one received)", c.errors_sent, t.errors);
  m.equal(p + "epochs_started", c.epochs_started, 0);
  // Every rank joined, and its first packet to each lcore that owns chunks carried its cookie: proven once
  // there, since no address ever moves (so no drop unproven_limit either, below).
  std::set<uint16_t> owners;
  for (const auto& ci : j.layout.chunks()) owners.insert(ci.owner);
  m.equal(p + "addresses_proven", c.addresses_proven, workers * owners.size());
  m.equal(p + "joins", c.joins, workers);
  m.equal(p + "resets", c.resets, 0);
  // The drops the schedule provokes, counted against the job, each answered with an error the rank
  // received; no other drop of the job.
  for (size_t d = 0; d < engine::kDropCount; ++d) {
    const auto drop = static_cast<engine::Drop>(d);
    if (engine_decides(drop)) continue;  // above
    m.equal(p + "drop " + std::string(engine::drop_name(drop)), c.drops[d], provoked(drop, t));
  }
  if (advance_drops != 0 && c.advances_deferred == 0) {
    m.equal(p + "advances_deferred (advance_pending drops without a deferred advance)", c.advances_deferred, 1);
  }
}

}  // namespace

void check_counters(const engine::Engine& engine, const std::vector<std::unique_ptr<JobRun>>& jobs,
                    const EpochTally& tally) {
  const engine::Totals t = engine.totals();
  Mismatches m;
  for (const auto& j : jobs) check_job(t.jobs[j->index], *j, m);
  // Every drop, the lcores' and the jobs' together: only the ones the jobs' schedules provoked.
  for (size_t d = 0; d < engine::kDropCount; ++d) {
    const auto drop = static_cast<engine::Drop>(d);
    uint64_t expected = 0;
    for (const auto& j : jobs) {
      expected += engine_decides(drop) ? t.jobs[j->index].drops[d] : provoked(drop, j->tally);
    }
    m.equal("drop " + std::string(engine::drop_name(drop)), t.lcores.drops[d], expected);
  }
  for (size_t p = 0; p < proto::kParseErrorCount; ++p) {
    m.equal("malformed " + std::string(proto::parse_error_name(static_cast<proto::ParseError>(p))),
            t.lcores.malformed[p], 0);
  }
  const uint64_t shed = t.lcores.drops[static_cast<size_t>(engine::Drop::handoff_share_full)];
  const uint64_t handed = tally.misdirected - std::min(tally.misdirected, shed);
  m.equal("redirected_out (frames sent to a non-owning lcore)", t.lcores.redirected_out, handed);
  m.equal("redirected_in", t.lcores.redirected_in, handed);
  // Every frame an lcore received was accepted, dropped (named or malformed) or handed off.
  m.equal("unaccounted frames", t.lcores.unaccounted, 0);
  m.equal("frames received (rx_packets + redirected_in) against accepted + frames_dropped + redirected_out",
          t.lcores.rx_packets + t.lcores.redirected_in,
          t.lcores.accepted + t.lcores.frames_dropped + t.lcores.redirected_out);
  if (const std::string text = m.text(); !text.empty()) {
    throw Failure("the server's counters disagree with the schedule:" + text + "\n  all counters:\n" +
                  engine.format_counters());
  }
}

}  // namespace phub::stress

// Runs as steps: start, live progress while it runs, then drain, settle and summarize. Used by the
// command line (one step) and by Lua scenarios (many steps).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "generator.hpp"
#include "record.hpp"
#include "settings.hpp"
#include "stats.hpp"

namespace phub::pktgen {

// Set by SIGINT/SIGTERM: the current step stops early and scenarios end.
extern std::atomic<bool> g_interrupted;

class Session {
 public:
  Session(Generator& g, bool progress) : g_(g), progress_(progress) {}

  [[nodiscard]] Expected<void, std::string> begin(const RunSettings& s);
  // Wait (with progress lines) for up to `seconds` (0: until the rounds are done), stopping early when the
  // closed loop has done its rounds or on an interrupt.
  void wait(double seconds);
  // Stop the running step and return its summary (also kept in steps()).
  Record end();
  // Stats since begin(), for scenarios that look while a step runs.
  [[nodiscard]] Record live() const;
  [[nodiscard]] Expected<Record, std::string> run(const RunSettings& s);

  [[nodiscard]] bool running() const noexcept { return started_.has_value(); }
  [[nodiscard]] const std::vector<Record>& steps() const noexcept { return steps_; }
  // Any step with a mismatch or that did not settle.
  [[nodiscard]] bool verification_failed() const noexcept { return failed_; }

 private:
  Generator& g_;
  bool progress_;
  RunSettings settings_;
  std::optional<Totals> started_;
  Totals last_progress_;
  double next_progress_s_ = 0;
  std::vector<Record> steps_;
  bool failed_ = false;
};

}  // namespace phub::pktgen

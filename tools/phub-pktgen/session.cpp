// Step sequencing: start, progress, drain, settle, summary.
#include "session.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace phub::pktgen {

std::atomic<bool> g_interrupted{false};

namespace {

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

}  // namespace

Expected<void, std::string> Session::begin(const RunSettings& s) {
  if (running()) return unexpected(std::string("a run is already going; stop it first"));
  settings_ = s;
  started_ = collect(g_);
  last_progress_ = *started_;
  next_progress_s_ = started_->t_s + s.progress_ms / 1e3;
  if (auto r = g_.start(s); !r) {
    started_.reset();
    return r;
  }
  return {};
}

void Session::wait(double seconds) {
  if (!running()) {
    sleep_s(seconds);
    return;
  }
  const double t_end = collect(g_).t_s + seconds;
  const bool tty = isatty(fileno(stderr)) != 0;
  for (;;) {
    const Totals now = collect(g_);
    if (progress_ && settings_.progress_ms != 0 && now.t_s >= next_progress_s_) {
      const std::string line = progress_line(last_progress_, now, now.t_s - started_->t_s);
      std::fprintf(stderr, tty ? "\r%s\033[K" : "%s\n", line.c_str());
      last_progress_ = now;
      next_progress_s_ = now.t_s + settings_.progress_ms / 1e3;
    }
    if (g_interrupted.load()) break;
    if (settings_.rounds != 0 && g_.rounds_done()) break;
    if (seconds > 0 && now.t_s >= t_end) break;
    sleep_s(0.01);
  }
  if (progress_ && tty && settings_.progress_ms != 0) std::fputc('\n', stderr);
}

Record Session::end() {
  if (!running()) return Record{};
  const Totals stop = collect(g_);
  Totals drained = stop;
  if (settings_.mode == gen::LoopMode::open) {
    // Results may still arrive after sending stops: wait until none has come for drain_ms (a loaded
    // machine can hold a result back longer than any fixed wait), at most kDrainCapFactor times that.
    constexpr double kDrainCapFactor = 20;
    g_.drain();
    const double quiet_s = settings_.drain_ms / 1e3;
    double last_change_s = stop.t_s;
    uint64_t answered = stop.all().first_results;
    for (;;) {
      sleep_s(std::min(quiet_s, 0.01));
      drained = collect(g_);
      const uint64_t now_answered = drained.all().first_results;
      if (now_answered != answered) {
        answered = now_answered;
        last_change_s = drained.t_s;
      }
      if (drained.t_s - last_change_s >= quiet_s || drained.t_s - stop.t_s >= kDrainCapFactor * quiet_s) break;
      if (g_interrupted.load()) break;
    }
  }
  // settle_s 0: do not settle (a sink that answers nothing, e.g. measuring the TX ceiling); the step
  // then reports settled false without failing, and later steps start from an unknown server state.
  // Whether the rounds were done, read before finishing: a finished partition is idle, no longer running.
  const bool short_of_rounds = settings_.rounds != 0 && !g_.rounds_done() && settings_.mode == gen::LoopMode::closed;
  if (settings_.settle_s > 0) g_.finish();
  const double deadline = drained.t_s + settings_.settle_s;
  while (settings_.settle_s > 0 && !g_.settled() && collect(g_).t_s < deadline && !g_interrupted.load()) sleep_s(0.005);
  const bool ok = settings_.settle_s > 0 && g_.settled();
  const Totals settled = collect(g_);
  Record r = summarize(g_, settings_, StepTimes{*started_, stop, drained, settled, ok});
  if ((!ok && settings_.settle_s > 0) || short_of_rounds) {
    // Say where every partition stands (read racily: the lcores still run; good enough to diagnose).
    std::fprintf(stderr, "pktgen: step ended %s; partition states:\n", ok ? "before its rounds were done" : "unsettled");
    for (const auto& l : g_.lcores()) {
      for (size_t j = 0; j < l->partitions().size(); ++j) {
        std::fprintf(stderr, "pktgen:   lcore %u job %u: %s\n", l->resources().lcore_id, g_.jobs()[j].wl.spec().id,
                     l->partitions()[j]->describe().c_str());
      }
    }
  }
  started_.reset();
  if ((!ok && settings_.settle_s > 0) || r.number("mismatches") != 0) failed_ = true;
  steps_.push_back(r);
  return r;
}

Record Session::live() const {
  if (!running()) return Record{};
  const Totals now = collect(g_);
  return summarize(g_, settings_, StepTimes{*started_, now, now, now, true});
}

Expected<Record, std::string> Session::run(const RunSettings& s) {
  if (auto r = begin(s); !r) return unexpected(r.error());
  wait(s.duration_s);
  return end();
}

}  // namespace phub::pktgen

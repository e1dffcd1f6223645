// The control commands on a running server (see server_control.hpp).
#include "phub/ctl/server_control.hpp"

#include <algorithm>

#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"
#include "phub/ctl/reload.hpp"
#include "phub/ctl/report_json.hpp"

#ifndef PHUB_VERSION
#define PHUB_VERSION "unknown"
#endif

namespace phub::ctl {
namespace {

std::string job_line(const engine::CounterReport::Job& j, const engine::JobPlan& plan) {
  const auto& c = plan.cfg;
  return c.name + ": id " + std::to_string(c.id) + ", " + (plan.math.ps ? "ps" : "allreduce") +
         (plan.math.deterministic ? " deterministic" : "") + ", " + std::to_string(c.workers) + " workers, " +
         std::string(dtype_name(c.dtype)) + ", " + std::to_string(plan.layout.total_elems()) + " elems in " +
         std::to_string(plan.layout.chunk_count()) + " chunks, udp " + std::to_string(c.port_base) + ", epoch " +
         std::to_string(j.epoch) + ", rounds " + std::to_string(j.counters.rounds_completed) + ", open rounds " +
         std::to_string(j.open_rounds) + (j.draining ? ", draining" : "");
}

}  // namespace

ServerControl::ServerControl(engine::Engine& engine, CounterCache& cache, std::string config_path,
                             ReloadHook hook, std::function<void()> waiting)
    : engine_(engine),
      cache_(cache),
      config_path_(std::move(config_path)),
      hook_(std::move(hook)),
      waiting_(std::move(waiting)) {}

Reply ServerControl::status() {
  const auto& s = engine_.snapshot();
  const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_);
  std::string out = "phub-server " PHUB_VERSION ": running " + std::to_string(up.count()) + " s, " +
                    std::to_string(s.jobs.size()) + " job(s), " + std::to_string(engine_.lcores().size()) +
                    " lcore(s), " + std::to_string(s.ports.size()) + " port(s)\n";
  out += "config: " + (config_path_.empty() ? std::string("the embedded default") : config_path_) + "\n";
  for (const auto& line : engine_.queue_lines()) out += line + "\n";
  out += "reloads: " + std::to_string(applied_) + " applied, " + std::to_string(refused_) + " refused" +
         (last_reload_.empty() ? "" : "; last: " + last_reload_) + "\n";
  if (engine_.retired_jobs() != 0) {
    out += "removed jobs waiting for their transmits: " + std::to_string(engine_.retired_jobs()) + "\n";
  }
  return Reply::success(out);
}

Reply ServerControl::stats(StatsFormat format) {
  const auto s = cache_.latest();
  if (!s) return Reply::failure("no counters taken yet");
  return Reply::success(format == StatsFormat::json ? report_json(*s) : engine::format_report(s->report));
}

Reply ServerControl::jobs() {
  const auto s = cache_.latest();
  const auto& snap = engine_.snapshot();
  std::string out;
  for (const auto& plan : snap.jobs) {
    engine::CounterReport::Job j;
    if (s) {
      for (const auto& r : s->report.jobs) {
        if (r.id == plan->cfg.id) j = r;
      }
    }
    out += job_line(j, *plan) + "\n";
  }
  return Reply::success(out.empty() ? "no jobs\n" : out);
}

Reply ServerControl::job(std::string_view name) {
  const auto& snap = engine_.snapshot();
  const int i = snap.job_by_name(name);
  if (i < 0) return Reply::failure("no job named '" + std::string(name) + "'");
  const auto& plan = *snap.jobs[static_cast<size_t>(i)];
  const auto s = cache_.latest();
  engine::CounterReport::Job j;
  if (s) {
    for (const auto& r : s->report.jobs) {
      if (r.id == plan.cfg.id) j = r;
    }
  }
  std::string out = job_line(j, plan) + "\nmemory: " + plan.memory.describe() + "\n";
  for (const auto& f : engine::kJobFields) out += std::string(f.name) + " " + std::to_string(j.counters.*f.member) + "\n";
  for (size_t d = 0; d < engine::kDropCount; ++d) {
    if (j.counters.drops[d] != 0) {
      out += "drop " + std::string(engine::drop_name(static_cast<engine::Drop>(d))) + " " +
             std::to_string(j.counters.drops[d]) + "\n";
    }
  }
  for (const auto& h : j.hubs) {
    out += "hub " + h.rack + " (" + format_ipv4(h.ipv4) + "):";
    for (const auto& f : engine::kHubPeerFields) {
      if (!f.flag) out += " " + std::string(f.name) + " " + std::to_string(f.get(h));
    }
    out += " last_answer " + (h.answer_age_ms == UINT64_MAX ? std::string("never") : std::to_string(h.answer_age_ms) + " ms ago");
    out += " fingerprint " + h.fingerprint;
    for (size_t k = 0; k < h.fingerprint_differs.size(); ++k) out += (k == 0 ? " (" : ", ") + h.fingerprint_differs[k];
    if (!h.fingerprint_differs.empty()) out += " differ)";
    if (h.unreachable) out += " UNREACHABLE";
    out += "\n";
  }
  return Reply::success(out);
}

Reply ServerControl::config(bool show_secrets) {
  return Reply::success(config::dump_lua(engine_.config(), show_secrets ? config::Secrets::shown : config::Secrets::redacted));
}

Reply ServerControl::version() { return Reply::success("phub-server " PHUB_VERSION ", protocol 2\n"); }

Reply ServerControl::reload(std::optional<std::string_view> file) {
  const std::string path = file ? std::string(*file) : config_path_;
  if (hook_) hook_(true, "reloading " + (path.empty() ? std::string("the embedded config") : path));
  const ReloadReport r = ctl::reload(engine_, path, waiting_);
  if (r.applied) {
    ++applied_;
    config_path_ = path;  // a later SIGHUP reloads what runs now
  } else {
    ++refused_;
  }
  // One line: a refusal's reasons (indented lines below its first) joined after it.
  last_reload_.clear();
  for (size_t at = 0, end = 0; at < r.message.size(); at = end + 1) {
    end = std::min(r.message.find('\n', at), r.message.size());
    const size_t text = r.message.find_first_not_of(' ', at);
    if (text < end) last_reload_ += (last_reload_.empty() ? "" : " ") + r.message.substr(text, end - text);
  }
  cache_.refresh(engine_);  // what phub-ctl shows next is the new state
  if (hook_) hook_(false, r.applied ? "aggregating: reloaded" : "aggregating: reload refused, config unchanged");
  return r.applied ? Reply::success(r.message + "\n") : Reply::failure(r.message);
}

Reply ServerControl::drain(std::string_view name) {
  auto r = engine_.drain(name);
  if (!r) return Reply::failure(r.error());
  cache_.refresh(engine_);
  return Reply::success("job '" + std::string(name) +
                        "' drained: rounds in progress complete, no new round starts (phub-ctl reset starts it again)\n");
}

Reply ServerControl::reset(std::string_view name) {
  auto r = engine_.reset(name);
  if (!r) return Reply::failure(r.error());
  cache_.refresh(engine_);
  return Reply::success("job '" + std::string(name) +
                        "' reset: its rounds start again at 0 in a new epoch; its workers must restart\n");
}

Reply ServerControl::checkpoint(std::string_view name) {
  auto w = engine_.checkpoint(name);
  if (!w) return Reply::failure(w.error() + "\n");
  cache_.refresh(engine_);
  return Reply::success("job '" + std::string(name) + "': checkpoint of round " + std::to_string(w->round) +
                        " (epoch " + std::to_string(w->epoch) + ", step " + std::to_string(w->step) + ") written to " +
                        w->file.string() + ": " + std::to_string(w->file_bytes) + " bytes for " +
                        std::to_string(w->state_bytes) + " bytes of state, copied in " +
                        std::to_string(w->copy_ns / 1000) + " us, written in " + std::to_string(w->write_ns / 1000) +
                        " us" + (w->pruned != 0 ? ", " + std::to_string(w->pruned) + " older removed" : "") + "\n");
}

}  // namespace phub::ctl

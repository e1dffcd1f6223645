// The control socket's commands on a running server (the Handler of lib/ctl): status, counters, jobs, the
// running config, reload, drain, reset and checkpoint. Runs on the control thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "phub/ctl/counter_cache.hpp"
#include "phub/ctl/handler.hpp"
#include "phub/engine/engine.hpp"

namespace phub::ctl {

class ServerControl : public Handler {
 public:
  // Called before (true) and after (false) every reload, with a status line (systemd's RELOADING/READY).
  using ReloadHook = std::function<void(bool starting, const std::string& status)>;

  // `waiting`: called about every millisecond while a reload waits for a removed job's rounds (up to
  // timeouts.drain_ms), so that the control loop's duties that cannot wait that long (the watchdog) go on.
  ServerControl(engine::Engine& engine, CounterCache& cache, std::string config_path, ReloadHook hook,
                std::function<void()> waiting = {});

  Reply status() override;
  Reply stats(StatsFormat format) override;
  Reply jobs() override;
  Reply job(std::string_view name) override;
  Reply config(bool show_secrets) override;
  Reply version() override;
  Reply reload(std::optional<std::string_view> file) override;
  Reply drain(std::string_view name) override;
  Reply reset(std::string_view name) override;
  Reply checkpoint(std::string_view name) override;

  // SIGHUP: the file the server started with (or last reloaded), as a reload command would.
  Reply reload_start_file() { return reload(std::nullopt); }
  [[nodiscard]] uint64_t reloads_applied() const noexcept { return applied_; }

 private:
  engine::Engine& engine_;
  CounterCache& cache_;
  std::string config_path_;  // empty: the embedded default
  ReloadHook hook_;
  std::function<void()> waiting_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  uint64_t applied_ = 0, refused_ = 0;
  std::string last_reload_;
};

}  // namespace phub::ctl

// Reload from a config file (see reload.hpp).
#include "phub/ctl/reload.hpp"

#include <cstdio>

#include "phub/config/load.hpp"

namespace phub::ctl {
namespace {

std::string ms(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

}  // namespace

ReloadReport reload(engine::Engine& engine, const std::string& path, const std::function<void()>& waiting) {
  const std::string name = path.empty() ? "the embedded default config" : path;
  auto cfg = path.empty() ? config::load_string(config::embedded_default(), "phub.lua (embedded default)")
                          : config::load_file(path);
  ReloadReport r;
  if (!cfg) {
    r.message = "reload of " + name + " refused, the running config is unchanged:\n  " + cfg.error();
    return r;
  }
  auto out = engine.apply(*cfg, waiting);
  if (!out) {
    r.message = "reload of " + name + " refused, the running config is unchanged:";
    for (const auto& reason : out.error()) r.message += "\n  " + reason;
    return r;
  }
  r.applied = true;
  r.message = "reload of " + name + " applied: " + out->diff.describe(*cfg) + "; grace period " + ms(out->grace_ns);
  if (!out->diff.removed.empty()) {
    r.message += ", drain " + ms(out->drain_ns) + (out->drain_timed_out ? " (timed out: rounds in progress dropped)" : "");
  }
  return r;
}

}  // namespace phub::ctl

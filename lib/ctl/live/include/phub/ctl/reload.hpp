// A reload as the server runs it: load the file through the Lua sandbox, apply it to the engine, and say
// what happened (or why nothing did) in words an operator can act on.
#pragma once

#include <functional>
#include <string>

#include "phub/engine/engine.hpp"

namespace phub::ctl {

struct ReloadReport {
  bool applied = false;
  std::string message;  // one line on success; on refusal a first line, then one line per reason
};

// `path` empty: the embedded default config. `waiting`: called while the reload waits for the rounds of
// removed jobs (Engine::apply).
[[nodiscard]] ReloadReport reload(engine::Engine& engine, const std::string& path,
                                  const std::function<void()>& waiting = {});

}  // namespace phub::ctl

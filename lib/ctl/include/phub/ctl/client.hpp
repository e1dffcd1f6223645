// The client end of the control socket: one request, its answer, within a time limit (phub-ctl's core).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/ctl/handler.hpp"

namespace phub::ctl {

struct CallError {
  enum class Kind {
    connect,  // no server to talk to: nothing listens at the path, or it may not be used
    timeout,  // no whole answer in time
    broken,   // the connection failed or the answer was not in the protocol's form
  };
  Kind kind = Kind::broken;
  std::string message;  // what failed, with the system's reason
  int errno_value = 0;  // for Kind::connect: connect's errno (0 when the path itself is unusable)
};

// Connects to the socket at `path`, sends `request` (one line, newline included: format_request) and
// returns the server's answer. Waits at most `timeout` in all.
[[nodiscard]] Expected<Reply, CallError> call(const std::string& path, std::string_view request,
                                             std::chrono::milliseconds timeout);

}  // namespace phub::ctl

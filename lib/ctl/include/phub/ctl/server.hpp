// The control socket's server: accepts phub-ctl clients on a UNIX socket and answers their requests
// through a Handler, from the caller's thread, without ever blocking it for long.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "phub/base/expected.hpp"
#include "phub/ctl/handler.hpp"

namespace phub::ctl {

struct ServerLimits {
  size_t max_clients = 16;                           // more are answered with an error and closed
  std::chrono::milliseconds request_timeout{5000};   // to send a whole request, from connecting or the last answer
  std::chrono::milliseconds answer_timeout{5000};    // to take a whole answer, from when it is ready
};

// What happened on the socket, for the server's counters.
struct ServerCounters {
  uint64_t clients_accepted = 0;
  uint64_t clients_refused = 0;     // over max_clients
  uint64_t requests = 0;            // complete requests answered
  uint64_t requests_failed = 0;     // of those, answered with an error
  uint64_t requests_too_long = 0;   // lines over kMaxRequestBytes: refused, connection closed
  uint64_t request_timeouts = 0;    // no whole request within request_timeout: connection closed
  uint64_t answer_timeouts = 0;     // an answer not taken within answer_timeout: connection closed
  uint64_t clients_lost = 0;        // gone with a request or an answer half-way
};

class ControlServer {
 public:
  // Listens on `path` (mode 0600; see ListenSocket for what happens to an existing file). The handler
  // must outlive the server.
  [[nodiscard]] static Expected<std::unique_ptr<ControlServer>, std::string> open(const std::string& path,
                                                                                  Handler& handler,
                                                                                  ServerLimits limits = {});
  // Closes every connection and the socket, and removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Waits up to `timeout` for clients, then accepts, reads, answers and writes what is ready, and
  // closes the clients whose time is up. Returns early when something happened; call it in a loop.
  // Reads and writes never block; the time spent beyond the wait is the Handler's.
  void poll_once(std::chrono::milliseconds timeout);

  [[nodiscard]] const std::string& path() const;
  [[nodiscard]] size_t client_count() const;
  [[nodiscard]] const ServerCounters& counters() const;

 private:
  struct Impl;
  explicit ControlServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace phub::ctl

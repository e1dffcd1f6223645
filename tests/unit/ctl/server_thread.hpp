// A ControlServer polled on a thread of its own, as the server's control thread will, for socket tests.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "phub/ctl/server.hpp"

namespace phub::ctl::test {

class ServerThread {
 public:
  explicit ServerThread(std::unique_ptr<ControlServer> server)
      : server_(std::move(server)), thread_([this] { run(); }) {}
  ~ServerThread() { stop(); }
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // The counters and the number of connections after the latest poll.
  [[nodiscard]] ServerCounters counters() const {
    std::lock_guard lock(mutex_);
    return counters_;
  }
  [[nodiscard]] size_t clients() const {
    std::lock_guard lock(mutex_);
    return clients_;
  }

  // Waits up to `timeout` until `holds(counters, clients)`; false if it never did.
  bool wait_until(const std::function<bool(const ServerCounters&, size_t)>& holds,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (holds(counters(), clients())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return holds(counters(), clients());
  }

 private:
  void run() {
    while (!stop_) {
      server_->poll_once(std::chrono::milliseconds(10));
      std::lock_guard lock(mutex_);
      counters_ = server_->counters();
      clients_ = server_->client_count();
    }
  }

  std::unique_ptr<ControlServer> server_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  ServerCounters counters_;
  size_t clients_ = 0;
  std::thread thread_;  // last: starts once everything it touches exists
};

}  // namespace phub::ctl::test

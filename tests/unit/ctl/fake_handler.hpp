// A Handler for tests: fixed answers, a record of the calls, and knobs for slow, large and throwing answers.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "phub/ctl/handler.hpp"

namespace phub::ctl {

// How gtest shows a Reply in a failure.
inline void PrintTo(const Reply& r, std::ostream* os) { *os << (r.ok ? "ok " : "error ") << '"' << r.body << '"'; }

}  // namespace phub::ctl

namespace phub::ctl::test {

class FakeHandler : public Handler {
 public:
  Reply status() override { return record("status", Reply::success("ready\n")); }
  Reply stats(StatsFormat format) override {
    if (format == StatsFormat::json) return record("stats --json", Reply::success("{\"pushes\": 12}\n"));
    return record("stats", Reply::success("pushes 12\n"));
  }
  Reply jobs() override { return record("jobs", Reply::success("alpha\nwith space\n")); }
  Reply job(std::string_view name) override {
    if (name == "alpha" || name == "with space") return record("job " + std::string(name), Reply::success("job " + std::string(name) + "\n"));
    return record("job " + std::string(name), Reply::failure("no job named '" + std::string(name) + "'\n"));
  }
  Reply config(bool show_secrets) override {
    return record(show_secrets ? "config --show-secrets" : "config", Reply::success(std::string(config_bytes.load(), '-')));
  }
  Reply version() override { return record("version", Reply::success("phub 0.1.0\n")); }
  Reply reload(std::optional<std::string_view> file) override {
    const std::string from = file ? std::string(*file) : std::string("the start-up file");
    return record(file ? "reload " + from : "reload", Reply::success("reloaded from " + from + "\n"));
  }
  Reply drain(std::string_view name) override {
    if (name == "slow") std::this_thread::sleep_for(slow_drain.load());
    return record("drain " + std::string(name), Reply::success("draining " + std::string(name) + "\n"));
  }
  Reply reset(std::string_view name) override {
    record("reset " + std::string(name), Reply{});
    if (name == "throw") throw std::runtime_error("the engine said no");
    return Reply::success("reset " + std::string(name) + "\n");
  }

  Reply checkpoint(std::string_view name) override {
    if (name != "alpha") return record("checkpoint " + std::string(name), Reply::failure("not a ps job\n"));
    return record("checkpoint alpha", Reply::success("checkpoint of round 7 written\n"));
  }

  // Every call so far, as "command argument".
  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }

  std::atomic<size_t> config_bytes{16};
  std::atomic<std::chrono::milliseconds> slow_drain{std::chrono::milliseconds(0)};

 private:
  Reply record(const std::string& call, Reply reply) {
    std::lock_guard lock(mutex_);
    calls_.push_back(call);
    return reply;
  }

  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
};

}  // namespace phub::ctl::test

// Notifier: sd_notify(3) messages to systemd, and the watchdog paced at half of WATCHDOG_USEC.
#include "notify.hpp"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>

namespace phub::server {
namespace {

// One STATUS= field: a newline would end the field and start another, so it becomes a space.
std::string status_field(std::string_view text) {
  std::string out = "STATUS=";
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}

uint64_t monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

Notifier::Notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  active_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // > 0: WATCHDOG_USEC is set and WATCHDOG_PID (if set) is this process.
  if (active_ && sd_watchdog_enabled(0, &usec) > 0) watchdog_ = std::chrono::microseconds(usec);
}

void Notifier::send(const std::string& message) {
  if (active_) (void)sd_notify(0, message.c_str());
}

void Notifier::ready(std::string_view status) {
  send("READY=1\n" + status_field(status));
  if (watchdog_.count() > 0) {
    pinging_ = true;
    next_ping_ = Clock::now() + watchdog_ / 2;
  }
}

void Notifier::reloading(std::string_view status) {
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec()) + "\n" + status_field(status));
}

void Notifier::reloaded(std::string_view status) { send("READY=1\n" + status_field(status)); }

void Notifier::stopping(std::string_view status) {
  pinging_ = false;
  send("STOPPING=1\n" + status_field(status));
}

void Notifier::status(std::string_view status) { send(status_field(status)); }

void Notifier::watchdog(Clock::time_point now) {
  if (!pinging_ || now < next_ping_) return;
  send("WATCHDOG=1");
  next_ping_ = now + watchdog_ / 2;
}

}  // namespace phub::server

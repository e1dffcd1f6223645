// Notifier: phub-server's messages to systemd (sd_notify): READY, RELOADING, STOPPING, STATUS and paced WATCHDOG.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace phub::server {

// Reads NOTIFY_SOCKET and WATCHDOG_USEC (and WATCHDOG_PID) once, when constructed. Without NOTIFY_SOCKET (not
// started by systemd, or `--check`) every call does nothing. Call it from the control thread only.
class Notifier {
 public:
  using Clock = std::chrono::steady_clock;

  Notifier();

  // The watchdog interval systemd asked for (WatchdogSec=); zero when it asked for none.
  [[nodiscard]] std::chrono::microseconds watchdog_interval() const noexcept { return watchdog_; }

  // "READY=1" with STATUS=status: the ports are started and the lcores run. Starts the watchdog's pacing.
  void ready(std::string_view status);
  // "RELOADING=1" with STATUS=status (and MONOTONIC_USEC, which systemd 253's Type=notify-reload wants):
  // send it before a reload starts, then reloaded() when it has ended, whether it was applied or refused.
  void reloading(std::string_view status);
  // "READY=1" with STATUS=status after reloading().
  void reloaded(std::string_view status);
  // "STOPPING=1" with STATUS=status: shutdown has begun (the lcores drain and stop after it).
  void stopping(std::string_view status);
  // "STATUS=status" alone.
  void status(std::string_view status);
  // "WATCHDOG=1" when half the watchdog interval has passed since ready() or the previous ping; nothing if
  // no watchdog was asked for or ready() has not been called. Call it every pass of the control loop.
  void watchdog(Clock::time_point now);

 private:
  void send(const std::string& message);

  bool active_ = false;                  // NOTIFY_SOCKET is set
  std::chrono::microseconds watchdog_{0};
  Clock::time_point next_ping_{};
  bool pinging_ = false;                 // after ready()
};

}  // namespace phub::server

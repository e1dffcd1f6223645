// Real-time scheduling of phub's threads: the policy a process inherits from `chrt` or systemd's
// CPUSchedulingPolicy, and the rule every phub poller keeps under it: never spin while another task on the
// same CPU waits for it (docs/server.md, "Real-time priority").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"

namespace phub {

// SCHED_FIFO or SCHED_RR with its priority (1..99).
struct RealtimePolicy {
  int policy = 0;
  int priority = 0;
};

// The shortest idle nap that gives the CPU away at real-time priority. A nanosleep shorter than the time it
// takes to arm its timer expires before the thread leaves the CPU, so the thread never does: at SCHED_FIFO a
// loop of 1 µs naps starves every task beside it (measured on the 2-CPU test VM: a 1 µs nap loop let a
// second SCHED_FIFO thread on its CPU run not once in 1 s; 2 µs did). The floor leaves a wide margin.
inline constexpr uint32_t kRealtimeMinNapUs = 20;

// The calling thread's policy when it is real-time (SCHED_FIFO or SCHED_RR); nullopt otherwise.
[[nodiscard]] std::optional<RealtimePolicy> realtime_policy_of_this_thread();

// Puts the calling thread under `policy` (real-time), or back under SCHED_OTHER for nullopt. The error
// names the policy and the reason.
[[nodiscard]] Expected<void, std::string> set_policy_of_this_thread(const std::optional<RealtimePolicy>& policy);

// "SCHED_FIFO 10", "SCHED_RR 5".
[[nodiscard]] std::string describe(const RealtimePolicy& policy);

// Empty when a poller at `policy` that naps `idle_sleep_us` after its empty polls gives its CPU away;
// otherwise why not, naming `setting` (the option or config field that sets the nap). A nap of 0 means
// busy-polling, which is refused at real-time priority unless `cpu_is_its_own` (no other thread of the
// process may run on the poller's CPUs).
[[nodiscard]] std::string realtime_polling_refusal(const std::optional<RealtimePolicy>& policy,
                                                   uint32_t idle_sleep_us, std::string_view setting,
                                                   bool cpu_is_its_own = false);

}  // namespace phub

// Real-time scheduling of phub's threads (phub/base/realtime.hpp).
#include "phub/base/realtime.hpp"

#include <pthread.h>
#include <sched.h>

#include <cstring>

namespace phub {

std::optional<RealtimePolicy> realtime_policy_of_this_thread() {
  int policy = 0;
  sched_param param{};
  if (pthread_getschedparam(pthread_self(), &policy, &param) != 0) return std::nullopt;
  if (policy != SCHED_FIFO && policy != SCHED_RR) return std::nullopt;
  return RealtimePolicy{policy, param.sched_priority};
}

Expected<void, std::string> set_policy_of_this_thread(const std::optional<RealtimePolicy>& policy) {
  sched_param param{};
  param.sched_priority = policy ? policy->priority : 0;
  const int rc = pthread_setschedparam(pthread_self(), policy ? policy->policy : SCHED_OTHER, &param);
  if (rc != 0) {
    return unexpected(std::string("cannot set ") + (policy ? describe(*policy) : std::string("SCHED_OTHER")) +
                      " on thread: " + std::strerror(rc));
  }
  return {};
}

std::string describe(const RealtimePolicy& policy) {
  return std::string(policy.policy == SCHED_RR ? "SCHED_RR " : "SCHED_FIFO ") + std::to_string(policy.priority);
}

std::string realtime_polling_refusal(const std::optional<RealtimePolicy>& policy, uint32_t idle_sleep_us,
                                     std::string_view setting, bool cpu_is_its_own) {
  if (!policy) return {};
  if (idle_sleep_us == 0) {
    if (cpu_is_its_own) return {};
    return std::string(setting) + " = 0 busy-polls, and at " + describe(*policy) +
           " (inherited from chrt or the unit's CPUSchedulingPolicy) a busy poller starves every task that shares "
           "its CPU: busy-poll only on CPUs no other thread of the process may run on, or nap at least " +
           std::to_string(kRealtimeMinNapUs) + " us";
  }
  if (idle_sleep_us < kRealtimeMinNapUs) {
    return std::string(setting) + " = " + std::to_string(idle_sleep_us) + " us is shorter than the " +
           std::to_string(kRealtimeMinNapUs) + " us a nap needs to give the CPU away at " + describe(*policy) +
           " (a shorter one ends before the thread leaves the CPU, and the poller spins)";
  }
  return {};
}

}  // namespace phub

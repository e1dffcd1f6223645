// Starting the EAL and cleaning it up.
#include "phub/drivers/eal.hpp"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "phub/drivers/runtime_dir.hpp"

namespace phub::drivers {

Expected<Eal, std::string> Eal::start(std::string_view program, const std::vector<std::string>& args,
                                      bool keep_thread_affinity) {
  EalArgv argv(program, args);
  cpu_set_t cpus;
  const bool have_cpus = keep_thread_affinity && pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  // Every thread rte_eal_init creates (its control threads, the worker lcores) inherits the caller's policy,
  // and at real-time priority the EAL spins: rte_ctrl_thread_create waits for its new thread with 1 us naps,
  // which never give the CPU away (phub/base/realtime.hpp), so two such processes on one CPU never finish
  // starting. The EAL starts under SCHED_OTHER; the caller gets its policy back after, and phub's pollers
  // take it at their start (Eal::realtime).
  const auto realtime = realtime_policy_of_this_thread();
  if (realtime) {
    if (auto normal = set_policy_of_this_thread(std::nullopt); !normal) return unexpected(normal.error());
  }
  const int parsed = rte_eal_init(argv.argc(), argv.argv());
  std::string realtime_back;  // why the policy could not be put back (empty: it was, or there was none)
  if (realtime) {
    if (auto back = set_policy_of_this_thread(realtime); !back) realtime_back = back.error();
  }
  if (parsed < 0) {
    return unexpected("EAL initialisation failed (" + std::string(rte_strerror(rte_errno)) +
                      "); EAL arguments were: " + join_eal_args(args));
  }
  Eal eal;
  eal.live_ = true;  // from here on the EAL is cleaned up, whatever follows
  eal.realtime_ = realtime;
  const auto prefix = file_prefix_of(args);
  if (prefix && rte_eal_process_type() == RTE_PROC_PRIMARY && is_own_runtime_dir(rte_eal_get_runtime_dir(), *prefix)) {
    eal.own_prefix_ = *prefix;
  }
  if (!realtime_back.empty()) return unexpected("after the EAL started: " + realtime_back);
  if (parsed != argv.argc() - 1) {
    // rte_eal_init puts the program name just before the first argument it did not take.
    return unexpected("EAL arguments: \"" + std::string(argv.argv()[parsed + 1]) +
                      "\" is not an EAL option (rte_eal_init stopped there); EAL arguments were: " +
                      join_eal_args(args));
  }
  if (have_cpus) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  return eal;
}

int wait_lcore(unsigned lcore_id) {
  while (rte_eal_get_lcore_state(lcore_id) == RUNNING) std::this_thread::sleep_for(std::chrono::microseconds(100));
  return rte_eal_wait_lcore(lcore_id);
}

bool lcore_has_cpus_of_its_own(unsigned lcore_id) {
  const rte_cpuset_t mine = rte_lcore_cpuset(lcore_id);
  for (unsigned other = 0; other < RTE_MAX_LCORE; ++other) {
    if (other == lcore_id || !rte_lcore_is_enabled(other)) continue;
    rte_cpuset_t theirs = rte_lcore_cpuset(other);
    CPU_AND(&theirs, &theirs, &mine);
    if (CPU_COUNT(&theirs) != 0) return false;
  }
  return true;
}

Eal::~Eal() {
  if (!live_) return;
  rte_eal_cleanup();
  if (own_prefix_.empty()) return;
  if (auto removed = remove_runtime_dir(own_prefix_); !removed) std::fprintf(stderr, "%s\n", removed.error().c_str());
}

}  // namespace phub::drivers

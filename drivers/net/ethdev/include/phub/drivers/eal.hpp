// The EAL of a phub program: an owner that starts it from its arguments (phub/base/eal_args.hpp) and cleans
// it up when it goes away, its runtime directory included.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phub/base/eal_args.hpp"
#include "phub/base/expected.hpp"
#include "phub/base/realtime.hpp"

namespace phub::drivers {

class Eal {
 public:
  // Runs rte_eal_init for `program` with `args`, every one of which must be an EAL argument (rte_eal_init
  // stops at "--" or at a word that is not an option and leaves the rest; that is refused). The calling
  // thread keeps the CPU affinity it had before when `keep_thread_affinity` (the EAL pins it to the main
  // lcore). The error names the arguments. A caller at real-time priority (chrt, CPUSchedulingPolicy) is
  // under SCHED_OTHER while the EAL starts, so that none of the EAL's threads inherits real-time priority,
  // and gets its policy back after.
  [[nodiscard]] static Expected<Eal, std::string> start(std::string_view program, const std::vector<std::string>& args,
                                                        bool keep_thread_affinity = false);
  Eal() = default;
  Eal(Eal&& o) noexcept
      : live_(std::exchange(o.live_, false)), own_prefix_(std::move(o.own_prefix_)), realtime_(o.realtime_) {}
  Eal& operator=(Eal&&) = delete;
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;
  // rte_eal_cleanup, then the runtime directory removed (phub/drivers/runtime_dir.hpp) when it is this
  // process's own: a primary process's, started with an explicit --file-prefix, at /var/run/dpdk/<prefix>
  // (phub/base/eal_args.hpp is_own_runtime_dir). A directory that cannot be removed is named on stderr.
  // Destroy the Eal after every port and pool the program opened is closed.
  ~Eal();

  // The real-time policy the process was started with (nullopt: none). Pollers take it at their start, once
  // realtime_polling_refusal (phub/base/realtime.hpp) has nothing against their polling.
  [[nodiscard]] const std::optional<RealtimePolicy>& realtime() const { return realtime_; }

 private:
  bool live_ = false;
  std::string own_prefix_;  // empty: the runtime directory is not this process's to remove
  std::optional<RealtimePolicy> realtime_;
};

// Waits until lcore `lcore_id` has returned from what rte_eal_remote_launch gave it, napping 100 us between
// looks; returns its return value. rte_eal_wait_lcore spins with rte_pause instead: at real-time priority that
// spin keeps the lcore it waits for off a CPU the two share, and neither ever ends.
int wait_lcore(unsigned lcore_id);

// Whether no other enabled lcore (the main lcore included) may run on any CPU of `lcore_id`.
[[nodiscard]] bool lcore_has_cpus_of_its_own(unsigned lcore_id);

}  // namespace phub::drivers

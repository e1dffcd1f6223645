// The EAL of a phub program: an owner that starts it from its arguments (phub/base/eal_args.hpp) and cleans
// it up when it goes away, its runtime directory included.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phub/base/eal_args.hpp"
#include "phub/base/expected.hpp"

namespace phub::drivers {

class Eal {
 public:
  // Runs rte_eal_init for `program` with `args`, every one of which must be an EAL argument (rte_eal_init
  // stops at "--" or at a word that is not an option and leaves the rest; that is refused). The calling
  // thread keeps the CPU affinity it had before when `keep_thread_affinity` (the EAL pins it to the main
  // lcore). The error names the arguments.
  [[nodiscard]] static Expected<Eal, std::string> start(std::string_view program, const std::vector<std::string>& args,
                                                        bool keep_thread_affinity = false);
  Eal() = default;
  Eal(Eal&& o) noexcept : live_(std::exchange(o.live_, false)), own_prefix_(std::move(o.own_prefix_)) {}
  Eal& operator=(Eal&&) = delete;
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;
  // rte_eal_cleanup, then the runtime directory removed (phub/drivers/runtime_dir.hpp) when it is this
  // process's own: a primary process's, started with an explicit --file-prefix, at /var/run/dpdk/<prefix>
  // (phub/base/eal_args.hpp is_own_runtime_dir). A directory that cannot be removed is named on stderr.
  // Destroy the Eal after every port and pool the program opened is closed.
  ~Eal();

 private:
  bool live_ = false;
  std::string own_prefix_;  // empty: the runtime directory is not this process's to remove
};

}  // namespace phub::drivers

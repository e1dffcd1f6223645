// Starting the EAL and cleaning it up.
#include "phub/drivers/eal.hpp"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <cstdio>

#include "phub/drivers/runtime_dir.hpp"

namespace phub::drivers {

Expected<Eal, std::string> Eal::start(std::string_view program, const std::vector<std::string>& args,
                                      bool keep_thread_affinity) {
  EalArgv argv(program, args);
  cpu_set_t cpus;
  const bool have_cpus = keep_thread_affinity && pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  const int parsed = rte_eal_init(argv.argc(), argv.argv());
  if (parsed < 0) {
    return unexpected("EAL initialisation failed (" + std::string(rte_strerror(rte_errno)) +
                      "); EAL arguments were: " + join_eal_args(args));
  }
  Eal eal;
  eal.live_ = true;  // from here on the EAL is cleaned up, whatever follows
  const auto prefix = file_prefix_of(args);
  if (prefix && rte_eal_process_type() == RTE_PROC_PRIMARY && is_own_runtime_dir(rte_eal_get_runtime_dir(), *prefix)) {
    eal.own_prefix_ = *prefix;
  }
  if (parsed != argv.argc() - 1) {
    // rte_eal_init puts the program name just before the first argument it did not take.
    return unexpected("EAL arguments: \"" + std::string(argv.argv()[parsed + 1]) +
                      "\" is not an EAL option (rte_eal_init stopped there); EAL arguments were: " +
                      join_eal_args(args));
  }
  if (have_cpus) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  return eal;
}

Eal::~Eal() {
  if (!live_) return;
  rte_eal_cleanup();
  if (own_prefix_.empty()) return;
  if (auto removed = remove_runtime_dir(own_prefix_); !removed) std::fprintf(stderr, "%s\n", removed.error().c_str());
}

}  // namespace phub::drivers

// Starting and stopping the EAL for the DPDK probe transport.
#include "dpdk_eal.hpp"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <sstream>
#include <vector>

namespace phub::probe {

Expected<Eal, std::string> Eal::start(const std::string& args) {
  std::vector<std::string> words{"phub-probe"};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  cpu_set_t cpus;
  const bool have_cpus = pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  const int argc = static_cast<int>(words.size());
  const int used = rte_eal_init(argc, argv.data());
  if (used < 0) return unexpected("EAL initialisation failed (" + args + "): " + rte_strerror(rte_errno));
  Eal eal;
  eal.live_ = true;
  if (used != argc - 1) return unexpected("EAL arguments not understood: \"" + args + "\"");
  if (have_cpus) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  return eal;
}

Eal::~Eal() {
  if (live_) rte_eal_cleanup();
}

}  // namespace phub::probe

// The EAL of a phub-probe agent: started from one argument string, cleaned up when the owner goes away.
#pragma once

#include <string>
#include <utility>

#include "phub/base/expected.hpp"

namespace phub::probe {

class Eal {
 public:
  // Splits `args` at whitespace and runs rte_eal_init. The calling thread keeps the CPU affinity it had
  // before (the EAL pins it to its first lcore), so the agent's threads are scheduled as usual.
  [[nodiscard]] static Expected<Eal, std::string> start(const std::string& args);
  Eal() = default;
  Eal(Eal&& o) noexcept : live_(std::exchange(o.live_, false)) {}
  Eal& operator=(Eal&&) = delete;
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;
  ~Eal();

 private:
  bool live_ = false;
};

}  // namespace phub::probe

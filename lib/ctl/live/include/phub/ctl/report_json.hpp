// A counter sample as JSON (phub-ctl stats --json): every counter of the table by name, per lcore and per job,
// the drops by reason, each job's latency histogram, the ports.
#pragma once

#include <string>

#include "phub/ctl/counter_cache.hpp"

namespace phub::ctl {

[[nodiscard]] std::string report_json(const CounterSample& s);

}  // namespace phub::ctl

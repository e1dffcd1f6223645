// DPDK telemetry commands under /phub/ (readable with dpdk-telemetry.py): stats, lcores, jobs, job,NAME,
// ports, all from the shared counter sample.
#pragma once

#include "phub/ctl/counter_cache.hpp"

namespace phub::ctl {

// Registers the commands (once per process; the EAL must be up). `cache` must outlive the EAL.
void register_telemetry(const CounterCache* cache);

}  // namespace phub::ctl

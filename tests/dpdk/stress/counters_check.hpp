// The server's counters after an epoch against what the schedule did: exact where the schedule alone
// decides them (rounds and contributions, requests, answers, hand-offs, the drops it provoked, none
// other), bounds where the engine's timing decides (duplicates, inits that came too late).
#pragma once

#include <memory>
#include <vector>

#include "driver.hpp"
#include "job_run.hpp"
#include "phub/engine/engine.hpp"

namespace phub::stress {

// Throws a Failure naming every counter that is off.
void check_counters(const engine::Engine& engine, const std::vector<std::unique_ptr<JobRun>>& jobs,
                    const EpochTally& tally);

}  // namespace phub::stress

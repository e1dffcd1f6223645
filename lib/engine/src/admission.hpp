// Admission of a config's jobs (private to lib/engine): every job planned, quotas, the server's memory
// limit and UDP port conflicts checked, every refusal naming its field.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/expected.hpp"
#include "phub/config/config.hpp"
#include "phub/engine/job_plan.hpp"

namespace phub::engine {

[[nodiscard]] Expected<std::vector<std::shared_ptr<const JobPlan>>, std::vector<std::string>> plan_jobs(
    const config::Config& cfg, const agg::Kernels& kernels);

}  // namespace phub::engine

// One epoch of the stress run (see epoch.hpp).
#include "epoch.hpp"

#include <memory>
#include <sstream>
#include <vector>

#include "counters_check.hpp"
#include "driver.hpp"
#include "harness.hpp"
#include "job_run.hpp"
#include "phub/config/load.hpp"
#include "phub/engine/engine.hpp"

namespace phub::stress {
namespace {

config::Config epoch_config(const std::string& device, const EpochShape& shape) {
  std::vector<config::Job> jobs;
  for (const auto& j : shape.jobs) jobs.push_back(j.job);
  config::Config cfg = test::make_config(device, shape.lcores, std::move(jobs));
  cfg.timeouts.round_stall_ms = shape.round_stall_ms;
  if (auto ok = config::validate(cfg); !ok) throw Failure("the generator made an invalid config: " + ok.error());
  return cfg;
}

// The server side of an epoch: the link, the started engine and the workers' port. run_epoch declares it
// before the Driver, so the driver (which may still hold frames from the engine's pools) goes first.
struct Server {
  test::RingLink link;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<test::Workers> workers;

  Server(uint16_t lcores, const EpochShape& shape) : link(lcores) {
    auto e = engine::Engine::create(epoch_config(link.server_name(), shape));
    if (!e) throw Failure("Engine::create: " + e.error());
    engine = std::move(*e);
    if (auto started = engine->start(); !started) throw Failure("Engine::start: " + started.error());
    workers = std::make_unique<test::Workers>(link.worker_name(), lcores, *engine);
  }
  ~Server() {
    engine->stop();
    workers.reset();
    engine.reset();
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
};

// One line of what the schedule did and provoked, summed over the epoch's jobs.
std::string describe_events(const std::vector<std::unique_ptr<JobRun>>& jobs, const EpochTally& t) {
  JobTally sum;
  for (const auto& j : jobs) {
    const JobTally& x = j->tally;
    sum.push_packets += x.push_packets;
    sum.retransmit_flags += x.retransmit_flags;
    sum.rerequests += x.rerequests;
    sum.pulls += x.pulls;
    sum.init_packets += x.init_packets;
    sum.results += x.results;
    sum.pushes_lost += x.pushes_lost;
    sum.results_lost += x.results_lost;
    sum.results_held += x.results_held;
    sum.stalls += x.stalls;
    for (size_t s = 0; s < sum.errors_by_status.size(); ++s) sum.errors_by_status[s] += x.errors_by_status[s];
  }
  const auto& e = sum.errors_by_status;
  std::ostringstream o;
  o << "push frames " << sum.push_packets << " (lost " << sum.pushes_lost << ", retransmit flag "
    << sum.retransmit_flags << "), rerequests " << sum.rerequests << ", pulls " << sum.pulls << ", inits "
    << sum.init_packets << ", misdirected " << t.misdirected << ", stalls " << sum.stalls << "; results "
    << sum.results << " (lost " << sum.results_lost << ", held " << sum.results_held << "); errors: round_behind "
    << e[static_cast<size_t>(proto::Status::round_behind)] << " round_ahead "
    << e[static_cast<size_t>(proto::Status::round_ahead)] << " not_initialized "
    << e[static_cast<size_t>(proto::Status::not_initialized)] << " round_stalled "
    << e[static_cast<size_t>(proto::Status::round_stalled)];
  return o.str();
}

}  // namespace

EpochResult run_epoch(uint64_t seed, uint64_t epoch, const EpochShape& shape) {
  std::vector<std::unique_ptr<JobRun>> jobs;
  for (uint32_t j = 0; j < shape.jobs.size(); ++j) {
    jobs.push_back(std::make_unique<JobRun>(seed, epoch, j, shape.jobs[j], shape.lcores));
  }
  Server server(shape.lcores, shape);
  Driver driver(seed, epoch, shape, jobs, *server.engine, *server.workers);
  driver.run();
  driver.drain();
  check_counters(*server.engine, jobs, driver.tally());

  EpochResult r;
  r.jobs = jobs.size();
  for (const auto& j : jobs) r.chunk_rounds += static_cast<uint64_t>(j->layout.chunk_count()) * j->shape.rounds;
  r.results_checked = driver.tally().results_checked;
  r.elements_checked = driver.tally().elements_checked;
  for (const auto& c : server.engine->totals().jobs) r.advances_deferred += c.advances_deferred;
  r.events = describe_events(jobs, driver.tally());
  return r;
}

}  // namespace phub::stress

// Live change of the data plane by the control thread: a new config applied as one snapshot swap (Snapshot
// and JobRuntime lifetimes under RCU), and requests to the lcores (drain a job, reset its rounds).
#include <rte_cycles.h>

#include <chrono>
#include <thread>

#include "admission.hpp"
#include "phub/proto/session.hpp"
#include "phub/engine/engine.hpp"
#include "lcore.hpp"

namespace phub::engine {
namespace {

uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

void Engine::publish(std::shared_ptr<const Snapshot> next, ReloadOutcome* outcome) {
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const Snapshot> old = std::move(current_);
  current_ = std::move(next);
  published_.store(current_.get(), std::memory_order_release);
  // Every lcore that is running has passed a quiescent state after the swap: none still reads `old`.
  // (Sleeping lcores are offline and hold nothing; stopped ones are unregistered.)
  if (running_) rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
  if (outcome != nullptr) outcome->grace_ns = ns_since(t0);
  // Jobs `old` had and `current_` has not: kept until no transmit points into their result buffers.
  for (const auto& rt : old->runtimes) {
    const bool kept = std::any_of(current_->runtimes.begin(), current_->runtimes.end(),
                                  [&](const auto& r) { return r.get() == rt.get(); });
    if (!kept) retired_.push_back(rt);
  }
  old.reset();
  collect_retired();
}

void Engine::collect_retired() {
  std::erase_if(retired_, [](const std::shared_ptr<JobRuntime>& rt) {
    return rt.use_count() == 1 && rt->transmits_in_flight() == 0;
  });
}

Expected<ReloadOutcome, std::vector<std::string>> Engine::apply(const config::Config& next,
                                                                const std::function<void()>& waiting) {
  ReloadOutcome out;
  const config::Config& running = config();
  out.diff = diff_configs(running, next);
  if (!out.diff.ok()) return unexpected(out.diff.refused);

  auto plans = plan_jobs(next, *kernels_);
  if (!plans) return unexpected(plans.error());

  // The new job table: unchanged jobs keep their plan and state; changed ones keep their state under
  // a new plan (a rotated secret keeps the previous key for the overlap window); added ones get new state.
  const uint64_t now_tsc = rte_rdtsc();
  std::vector<std::shared_ptr<const JobPlan>> table;
  std::vector<std::shared_ptr<JobRuntime>> runtimes;
  for (auto& plan : *plans) {
    const int old = current_->job_by_id(plan->cfg.id);
    if (old < 0) {
      auto rt = make_runtime(*plan, next);
      if (!rt) return unexpected(std::vector<std::string>{rt.error()});
      runtimes.push_back(std::move(*rt));
      table.push_back(std::move(plan));
      continue;
    }
    const auto& old_plan = *current_->jobs[static_cast<size_t>(old)];
    runtimes.push_back(current_->runtimes[static_cast<size_t>(old)]);
    if (old_plan.cfg == plan->cfg) {
      table.push_back(current_->jobs[static_cast<size_t>(old)]);
      continue;
    }
    JobPlan changed = *plan;
    if (old_plan.cfg.secret != plan->cfg.secret && old_plan.authenticated && plan->authenticated) {
      changed.previous_key = old_plan.key;
      changed.previous_until_tsc = now_tsc + rte_get_tsc_hz() / 1000 * next.timeouts.secret_overlap_ms;
    } else if (old_plan.cfg.secret == plan->cfg.secret) {
      changed.previous_key = old_plan.previous_key;  // an overlap still running goes on
      changed.previous_until_tsc = old_plan.previous_until_tsc;
    }
    if (changed.previous_until_tsc != 0) changed.previous_handshake_key = proto::handshake_key(changed.previous_key);
    table.push_back(std::make_shared<const JobPlan>(std::move(changed)));
  }

  // Removed jobs start no new round; the rounds in progress get up to drain_ms to complete.
  const auto drain_start = std::chrono::steady_clock::now();
  for (uint32_t id : out.diff.removed) {
    const auto& name = current_->jobs[static_cast<size_t>(current_->job_by_id(id))]->cfg.name;
    if (auto r = ask_lcores(RequestKind::drain, name); !r) return unexpected(std::vector<std::string>{r.error()});
  }
  if (!out.diff.removed.empty()) {
    const auto budget = std::chrono::milliseconds(running.timeouts.drain_ms);
    for (;;) {
      uint64_t open = 0;
      for (uint32_t id : out.diff.removed) {
        open += current_->runtimes[static_cast<size_t>(current_->job_by_id(id))]->open_rounds();
      }
      if (open == 0) break;
      if (std::chrono::steady_clock::now() - drain_start >= budget) {
        out.drain_timed_out = true;
        break;
      }
      if (waiting) waiting();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    out.drain_ns = ns_since(drain_start);
  }

  auto snap = build_snapshot(std::make_shared<const config::Config>(next), std::move(table), std::move(runtimes));
  if (auto r = install_steering(*snap); !r) return unexpected(std::vector<std::string>{r.error()});
  publish(std::move(snap), &out);
  return out;
}

Expected<void, std::string> Engine::ask_lcores(RequestKind kind, std::string_view job_name) {
  const int j = current_->job_by_name(job_name);
  if (j < 0) return unexpected("no job named '" + std::string(job_name) + "'");
  Request r;
  r.kind = kind;
  r.job_id = current_->jobs[static_cast<size_t>(j)]->cfg.id;
  return ask_lcores(r);
}

Expected<void, std::string> Engine::ask_lcores(const Request& request) {
  std::vector<Request> reqs(lcores_.size(), request);
  // The lcores asked point into `reqs` until they answer: even when a ring is full, those answers are
  // awaited before `reqs` goes.
  size_t asked = 0;
  while (asked < lcores_.size() && rte_ring_sp_enqueue(requests_[asked], &reqs[asked]) == 0) ++asked;
  // The lcores answer within a loop iteration and a timer tick; stopped ones are served here.
  size_t answered = 0;
  auto all_answered = [&] {
    for (size_t i = 0; i < asked; ++i) {
      void* item = nullptr;
      while (rte_ring_sc_dequeue(responses_[i], &item) == 0) ++answered;
    }
    return answered >= asked;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool late = false;
  while (!all_answered()) {
    if (!running_) {
      for (auto& l : lcores_) l->serve_requests_stopped(*current_);
      continue;
    }
    late = late || std::chrono::steady_clock::now() >= deadline;
    // Late: keep waiting for the answers (the requests stay in the rings, pointing at `reqs`).
    std::this_thread::sleep_for(late ? std::chrono::microseconds(1000) : std::chrono::microseconds(200));
  }
  if (asked < lcores_.size()) return unexpected(std::string("lcore request ring full"));
  if (late) return unexpected(std::string("the lcores took over 5 s to answer"));
  return {};
}

Expected<void, std::string> Engine::drain(std::string_view job_name) { return ask_lcores(RequestKind::drain, job_name); }

Expected<void, std::string> Engine::reset(std::string_view job_name) {
  // A hierarchical job's epochs come from rank 0's hub, which tells the others: a reset there reaches every
  // hub, one elsewhere would split the job's epochs.
  if (const int j = current_->job_by_name(job_name); j >= 0) {
    const JobPlan& plan = *current_->jobs[static_cast<size_t>(j)];
    if (hierarchical(plan.math) && plan.math.hub.rack_of_rank[0] != plan.math.hub.my_rack) {
      return unexpected("job '" + std::string(job_name) + "' spans racks: reset it at rank 0's hub (rack " +
                        current_->config->racks[plan.math.hub.rack_of_rank[0]].name + "), which tells the other hubs");
    }
  }
  return ask_lcores(RequestKind::reset, job_name);
}

}  // namespace phub::engine

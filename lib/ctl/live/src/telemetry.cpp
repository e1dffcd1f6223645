// /phub/ telemetry commands (see telemetry.hpp). rte_telemetry's callbacks get no context: the cache is
// found through one process-wide pointer, set once before the commands are registered. Every answer but the
// list of job names carries "sample", the sequence number of the counter sample its values come from.
#include "phub/ctl/telemetry.hpp"

#include <rte_telemetry.h>

#include <atomic>
#include <string>

namespace phub::ctl {
namespace {

std::atomic<const CounterCache*> g_cache{nullptr};

std::shared_ptr<const CounterSample> sample() {
  const CounterCache* c = g_cache.load();
  return c != nullptr ? c->latest() : nullptr;
}

void add_lcore_counters(rte_tel_data* d, const engine::LcoreCounters& c) {
  for (const auto& f : engine::kLcoreFields) rte_tel_data_add_dict_u64(d, std::string(f.name).c_str(), c.*f.member);
}

void add_job_counters(rte_tel_data* d, const engine::JobCounters& c) {
  for (const auto& f : engine::kJobFields) rte_tel_data_add_dict_u64(d, std::string(f.name).c_str(), c.*f.member);
}

void add_drops(rte_tel_data* d, const std::array<uint64_t, engine::kDropCount>& drops) {
  for (size_t i = 0; i < engine::kDropCount; ++i) {
    rte_tel_data_add_dict_u64(d, ("drop_" + std::string(engine::drop_name(static_cast<engine::Drop>(i)))).c_str(), drops[i]);
  }
}

// Totals over lcores and jobs, every drop reason once.
int cmd_stats(const char*, const char*, rte_tel_data* d) {
  const auto s = sample();
  if (!s) return -1;
  engine::LcoreCounters lc;
  engine::JobCounters jc;
  for (const auto& l : s->report.lcores) engine::accumulate(lc, l.counters);
  for (const auto& j : s->report.jobs) engine::accumulate(jc, j.counters);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "sample", s->sequence);
  add_lcore_counters(d, lc);
  add_job_counters(d, jc);
  std::array<uint64_t, engine::kDropCount> drops = lc.drops;
  for (size_t i = 0; i < engine::kDropCount; ++i) drops[i] += jc.drops[i];
  add_drops(d, drops);
  uint64_t malformed = 0;
  for (uint64_t m : lc.malformed) malformed += m;
  rte_tel_data_add_dict_u64(d, "malformed", malformed);
  return 0;
}

int cmd_lcores(const char*, const char*, rte_tel_data* d) {
  const auto s = sample();
  if (!s) return -1;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "sample", s->sequence);
  for (const auto& l : s->report.lcores) {
    rte_tel_data* c = rte_tel_data_alloc();
    if (c == nullptr) return -1;
    rte_tel_data_start_dict(c);
    add_lcore_counters(c, l.counters);
    rte_tel_data_add_dict_container(d, ("lcore_" + std::to_string(l.lcore_id)).c_str(), c, 0);
  }
  return 0;
}

int cmd_jobs(const char*, const char*, rte_tel_data* d) {
  const auto s = sample();
  if (!s) return -1;
  rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
  for (const auto& j : s->report.jobs) rte_tel_data_add_array_string(d, j.name.c_str());
  return 0;
}

int cmd_job(const char*, const char* params, rte_tel_data* d) {
  const auto s = sample();
  if (!s || params == nullptr) return -1;
  for (const auto& j : s->report.jobs) {
    if (j.name != params) continue;
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "sample", s->sequence);
    rte_tel_data_add_dict_u64(d, "id", j.id);
    rte_tel_data_add_dict_u64(d, "epoch", j.epoch);
    rte_tel_data_add_dict_u64(d, "draining", j.draining ? 1 : 0);
    rte_tel_data_add_dict_u64(d, "open_rounds", j.open_rounds);
    add_job_counters(d, j.counters);
    add_drops(d, j.counters.drops);
    return 0;
  }
  return -1;
}

int cmd_ports(const char*, const char*, rte_tel_data* d) {
  const auto s = sample();
  if (!s) return -1;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "sample", s->sequence);
  for (const auto& p : s->report.ports) {
    rte_tel_data* c = rte_tel_data_alloc();
    if (c == nullptr) return -1;
    rte_tel_data_start_dict(c);
    for (const auto& f : drivers::kPortStatFields) rte_tel_data_add_dict_u64(c, std::string(f.name).c_str(), p.stats.*f.member);
    rte_tel_data_add_dict_container(d, p.name.c_str(), c, 0);
  }
  return 0;
}

}  // namespace

void register_telemetry(const CounterCache* cache) {
  if (g_cache.exchange(cache) != nullptr) return;  // registered already
  rte_telemetry_register_cmd("/phub/stats", cmd_stats, "phub counters summed over lcores and jobs. No parameters");
  rte_telemetry_register_cmd("/phub/lcores", cmd_lcores, "phub counters of each lcore. No parameters");
  rte_telemetry_register_cmd("/phub/jobs", cmd_jobs, "Names of phub's jobs. No parameters");
  rte_telemetry_register_cmd("/phub/job", cmd_job, "Counters and drops of one phub job. Parameter: job name");
  rte_telemetry_register_cmd("/phub/ports", cmd_ports, "phub's port counters. No parameters");
}

}  // namespace phub::ctl

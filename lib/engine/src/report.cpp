// Reading the counters (control thread): the report every exporter formats, the sums, and the text form.
#include <rte_cycles.h>
#include <rte_mempool.h>

#include <algorithm>
#include <sstream>

#include "phub/engine/engine.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/engine/hierarchy.hpp"
#include "lcore.hpp"

namespace phub::engine {
namespace {

// Each other rack's hub of job j, summed over the lcores (the newest answer of any).
void add_hub_peers(const Snapshot& s, size_t j, CounterReport::Job& job) {
  const JobPlan& plan = *s.jobs[j];
  if (plan.hub == nullptr) return;
  const uint64_t now = rte_rdtsc();
  for (uint16_t rack = 0; rack < plan.hub->hubs.size(); ++rack) {
    if (rack == plan.hub->my_rack) continue;
    CounterReport::Job::HubPeer p;
    p.rack = s.config->racks[rack].name;
    p.ipv4 = plan.hub->hubs[rack].ipv4;
    uint64_t last = 0, state = HubPeerCounters::kFingerprintUnknown, differs = 0, srtt = 0, rto = 0;
    for (const auto& lj : s.runtimes[j]->lcores) {
      const HubPeerCounters& c = lj->hub_counters[rack];
#define PHUB_X(name, help) p.name += load(c.name);
      PHUB_HUB_PEER_COUNTERS(PHUB_X)
#undef PHUB_X
      last = std::max(last, load(c.last_answer_tsc));
      state = std::max(state, load(c.fingerprint_state));  // differs on any lcore: differs
      differs |= load(c.fingerprint_differs);
      srtt = std::max(srtt, load(c.srtt_tsc));
      rto = std::max(rto, load(c.rto_tsc));
    }
    p.srtt_us = s.tsc_hz != 0 ? srtt * 1'000'000 / s.tsc_hz : 0;
    p.rto_us = s.tsc_hz != 0 ? rto * 1'000'000 / s.tsc_hz : 0;
    if (last != 0) p.answer_age_ms = (now > last ? now - last : 0) * 1000 / s.tsc_hz;
    p.fingerprint = state == HubPeerCounters::kFingerprintEqual     ? "equal"
                    : state == HubPeerCounters::kFingerprintDiffers ? "differs"
                                                                    : "unknown";
    for (size_t i = 0; i < HubFingerprint::kComponents; ++i) {
      if ((differs >> i & 1) != 0) p.fingerprint_differs.emplace_back(fingerprint_component_key(static_cast<HubFingerprint::Component>(i)));
    }
    const uint64_t since = last != 0 ? last : s.runtimes[j]->created_tsc;
    p.unreachable = s.round_stall_tsc != 0 && now > since && now - since > s.round_stall_tsc;
    job.hubs.push_back(std::move(p));
  }
}

}  // namespace

CounterReport Engine::report() const {
  CounterReport r;
  const Snapshot& s = snapshot();
  r.tsc_hz = s.tsc_hz;
  for (const auto& l : lcores_) {
    CounterReport::Lcore lc;
    lc.lcore_id = l->resources().lcore_id;
    lc.index = l->resources().index;
    accumulate(lc.counters, l->counters());
    r.lcores.push_back(std::move(lc));
  }
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    CounterReport::Job job;
    job.id = s.jobs[j]->cfg.id;
    job.name = s.jobs[j]->cfg.name;
    for (const auto& lj : s.runtimes[j]->lcores) {
      accumulate(job.counters, lj->counters);
      const auto epoch = __atomic_load_n(&lj->epoch, __ATOMIC_RELAXED);
      if (proto::epoch_newer(epoch, job.epoch)) job.epoch = epoch;
      job.draining = job.draining || __atomic_load_n(&lj->draining, __ATOMIC_RELAXED);
      job.open_rounds += load(lj->open_rounds);
    }
    add_hub_peers(s, j, job);
    r.jobs.push_back(std::move(job));
  }
  for (size_t p = 0; p < ports_.size(); ++p) r.ports.push_back({s.ports[p].name, ports_[p]->stats()});
  auto pool = [&r](const drivers::Mempool& m) {
    if (const rte_mempool* mp = m.get()) r.pools.push_back({mp->name, mp->size, m.in_use(), m.available()});
  };
  for (const auto& m : rx_pools_) pool(m);
  for (const auto& set : tx_pools_) {
    for (const auto* m : {&set.hdr, &set.ext, &set.copy}) pool(*m);
  }
  return r;
}

Totals Engine::totals() const {
  const CounterReport r = report();
  Totals t;
  for (const auto& l : r.lcores) accumulate(t.lcores, l.counters);
  for (const auto& j : r.jobs) {
    t.jobs.push_back(j.counters);
    for (size_t d = 0; d < kDropCount; ++d) t.lcores.drops[d] += j.counters.drops[d];
  }
  return t;
}

std::string format_report(const CounterReport& r) {
  std::ostringstream o;
  LcoreCounters sum;
  for (const auto& l : r.lcores) {
    const LcoreCounters& c = l.counters;
    accumulate(sum, c);
    o << "lcore " << l.lcore_id << ":";
    for (const auto& f : kLcoreFields) o << " " << f.name << " " << c.*f.member;
    o << " busy_percent " << (c.total_tsc ? 100 * c.busy_tsc / c.total_tsc : 0) << " tsc_hz " << r.tsc_hz;
    for (size_t op = 0; op < kOpcodeSlots; ++op) {  // phub messages by opcode, where any
      if (c.rx_messages[op] != 0) o << " rx_" << message_slot_name(op) << " " << c.rx_messages[op];
      if (c.tx_messages[op] != 0) o << " tx_" << message_slot_name(op) << " " << c.tx_messages[op];
    }
    o << "\n";
  }
  for (const auto& j : r.jobs) {
    const JobCounters& c = j.counters;
    o << "job " << j.name << ":";
    for (const auto& f : kJobFields) o << " " << f.name << " " << c.*f.member;
    o << " epoch " << j.epoch << " open_rounds " << j.open_rounds << (j.draining ? " draining" : "") << "\n";
    for (size_t d = 0; d < kDropCount; ++d) sum.drops[d] += c.drops[d];
  }
  o << "drops:";
  bool any = false;
  for (size_t d = 0; d < kDropCount; ++d) {
    if (sum.drops[d] == 0) continue;
    o << " " << drop_name(static_cast<Drop>(d)) << " " << sum.drops[d];
    any = true;
  }
  for (size_t d = 0; d < proto::kParseErrorCount; ++d) {
    if (sum.malformed[d] == 0) continue;
    o << " malformed_" << proto::parse_error_name(static_cast<proto::ParseError>(d)) << " " << sum.malformed[d];
    any = true;
  }
  o << (any ? "\n" : " none\n");
  for (const auto& p : r.ports) {
    o << "port " << p.name << ":";
    for (const auto& f : drivers::kPortStatFields) o << " " << f.name << " " << p.stats.*f.member;
    o << "\n";
  }
  for (const auto& p : r.pools) {
    o << "pool " << p.name << ": size " << p.size << " in_use " << p.in_use << " avail " << p.avail << "\n";
  }
  return o.str();
}

std::string Engine::format_counters() const { return format_report(report()); }

unsigned Engine::transmit_mbufs_in_use() const {
  unsigned n = 0;
  for (const auto& set : tx_pools_) {
    for (const auto* pool : {&set.hdr, &set.ext, &set.copy}) {
      if (pool->get() != nullptr) n += rte_mempool_in_use_count(pool->get());
    }
  }
  return n;
}

uint64_t Engine::job_allocated_bytes(size_t job_index) const {
  uint64_t total = 0;
  for (const auto& lj : snapshot().runtimes[job_index]->lcores) total += lj->allocated_bytes;
  return total;
}

std::vector<std::string> Engine::hub_events() {
  std::vector<std::string> lines;
  const CounterReport r = report();
  for (const auto& j : r.jobs) {
    for (const auto& h : j.hubs) {
      auto& [said_differs, said_unreachable] = hub_said_[{j.id, h.rack}];
      const std::string who = "job " + j.name + " (" + std::to_string(j.id) + "): hub " + h.rack + " (" +
                              format_ipv4(h.ipv4) + ")";
      if (h.fingerprint_differs != said_differs && !h.fingerprint_differs.empty()) {
        std::string what;
        for (size_t i = 0; i < HubFingerprint::kComponents; ++i) {
          const auto c = static_cast<HubFingerprint::Component>(i);
          if (std::find(h.fingerprint_differs.begin(), h.fingerprint_differs.end(), fingerprint_component_key(c)) !=
              h.fingerprint_differs.end()) {
            what += (what.empty() ? "" : "; ") + std::string(fingerprint_component_name(c));
          }
        }
        lines.push_back(who + " holds another hierarchy (" + what +
                        " differ from this hub's config); its forwards are dropped (fwd_fingerprint_mismatch)");
      }
      said_differs = h.fingerprint_differs;
      if (h.unreachable != said_unreachable) {
        lines.push_back(who + (h.unreachable ? " unreachable: nothing verified from it within round_stall_ms"
                                             : " answers again"));
      }
      said_unreachable = h.unreachable;
    }
  }
  return lines;
}

}  // namespace phub::engine

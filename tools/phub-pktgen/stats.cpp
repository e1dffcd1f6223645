// Collecting counters and turning them into summaries and progress lines.
#include "stats.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "phub/proto/header.hpp"

namespace phub::pktgen {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double rate(uint64_t a, uint64_t b, double dt) { return dt > 0 && b >= a ? static_cast<double>(b - a) / dt : 0.0; }

// Each JobTotals field and the partition counter it adds up.
using Field = std::pair<uint64_t JobTotals::*, gen::Counter gen::PartitionStats::*>;
constexpr Field kFields[] = {
    {&JobTotals::pushes, &gen::PartitionStats::pushes},
    {&JobTotals::originals, &gen::PartitionStats::originals},
    {&JobTotals::push_bytes, &gen::PartitionStats::push_bytes},
    {&JobTotals::dropped, &gen::PartitionStats::dropped},
    {&JobTotals::duplicated, &gen::PartitionStats::duplicated},
    {&JobTotals::retransmits, &gen::PartitionStats::retransmits},
    {&JobTotals::inits, &gen::PartitionStats::inits},
    {&JobTotals::results, &gen::PartitionStats::results},
    {&JobTotals::results_ok, &gen::PartitionStats::results_ok},
    {&JobTotals::mismatches, &gen::PartitionStats::mismatches},
    {&JobTotals::results_dup, &gen::PartitionStats::results_dup},
    {&JobTotals::results_unexpected, &gen::PartitionStats::results_unexpected},
    {&JobTotals::unverifiable, &gen::PartitionStats::unverifiable},
    {&JobTotals::first_results, &gen::PartitionStats::first_results},
    {&JobTotals::goodput_bytes, &gen::PartitionStats::goodput_bytes},
    {&JobTotals::results_lost, &gen::PartitionStats::results_lost},
};

}  // namespace

JobTotals Totals::all() const {
  JobTotals s;
  for (const auto& j : jobs) {
    for (const auto& [total, counter] : kFields) s.*total += j.*total;
    s.rounds += j.rounds;
    for (size_t e = 0; e < s.errors.size(); ++e) s.errors[e] += j.errors[e];
  }
  return s;
}

Totals collect(const Generator& g) {
  Totals t;
  t.t_s = seconds_now();
  t.jobs.resize(g.jobs().size());
  std::vector<uint64_t> min_rounds(g.jobs().size(), UINT64_MAX);
  using Port = gen::Counter LcoreCounters::*;
  const std::pair<uint64_t Totals::*, Port> port_fields[] = {
      {&Totals::tx_packets, &LcoreCounters::tx_packets}, {&Totals::tx_bytes, &LcoreCounters::tx_bytes},
      {&Totals::tx_full, &LcoreCounters::tx_full},       {&Totals::rx_packets, &LcoreCounters::rx_packets},
      {&Totals::rx_bytes, &LcoreCounters::rx_bytes},     {&Totals::rx_echo, &LcoreCounters::rx_echo},
      {&Totals::rx_echo_bytes, &LcoreCounters::rx_echo_bytes}, {&Totals::rx_malformed, &LcoreCounters::rx_malformed},
      {&Totals::rx_bad_tag, &LcoreCounters::rx_bad_tag}, {&Totals::rx_replayed, &LcoreCounters::rx_replayed},
      {&Totals::rx_unknown_job, &LcoreCounters::rx_unknown_job},
      {&Totals::rx_other, &LcoreCounters::rx_other},     {&Totals::handed_off, &LcoreCounters::handed_off},
      {&Totals::no_mbuf, &LcoreCounters::no_mbuf},       {&Totals::loops, &LcoreCounters::loops},
      {&Totals::idle_loops, &LcoreCounters::idle_loops}, {&Totals::recycled, &LcoreCounters::recycled},
      {&Totals::recycle_busy, &LcoreCounters::recycle_busy}};
  for (const auto& l : g.lcores()) {
    const LcoreCounters& c = l->counters();
    for (const auto& [total, counter] : port_fields) t.*total += (c.*counter).get();
    for (size_t f = 0; f < t.faults.size(); ++f) t.faults[f] += c.faults[f].get();
    for (size_t j = 0; j < l->partitions().size(); ++j) {
      const gen::Partition& p = *l->partitions()[j];
      const gen::PartitionStats& s = p.stats();
      JobTotals& o = t.jobs[j];
      for (const auto& [total, counter] : kFields) o.*total += (s.*counter).get();
      for (size_t e = 0; e < o.errors.size(); ++e) o.errors[e] += s.errors[e].get();
      if (p.slots().size() != 0) {
        min_rounds[j] = std::min(min_rounds[j], s.rounds.get() / p.workload().spec().workers);
      }
      gen::accumulate(t.round_ns, s.round_ns.snapshot());
    }
  }
  for (size_t j = 0; j < t.jobs.size(); ++j) t.jobs[j].rounds = min_rounds[j] == UINT64_MAX ? 0 : min_rounds[j];
  return t;
}

Record summarize(const Generator& g, const RunSettings& s, const StepTimes& t) {
  Record r;
  const double dt = t.stop.t_s - t.start.t_s;
  const JobTotals a0 = t.start.all(), a1 = t.stop.all(), ad = t.drained.all(), a2 = t.settled.all();
  const bool open = s.mode == gen::LoopMode::open;
  r.set("mode", std::string(open ? "open" : "closed"));
  r.set("duration_s", dt);
  // The measured window on the host's monotonic clock (steady_clock): comparable between generators run at once.
  r.set("started_s", t.start.t_s);
  r.set("stopped_s", t.stop.t_s);
  if (open) r.set("rate_pps", s.rate_pps);
  r.set("tx_packets", static_cast<double>(t.stop.tx_packets - t.start.tx_packets));
  r.set("tx_pps", rate(t.start.tx_packets, t.stop.tx_packets, dt));
  r.set("tx_gbps", rate(t.start.tx_bytes, t.stop.tx_bytes, dt) * 8e-9);
  r.set("rx_pps", rate(t.start.rx_packets, t.stop.rx_packets, dt));
  r.set("pushes_pps", rate(a0.pushes, a1.pushes, dt));
  r.set("goodput_gbps", rate(a0.goodput_bytes, a1.goodput_bytes, dt) * 8e-9);
  r.set("goodput_bytes", static_cast<double>(a1.goodput_bytes - a0.goodput_bytes));
  // Push payload bytes answered over the whole step, settling included: what the server accepted.
  r.set("answered_bytes", static_cast<double>(a2.goodput_bytes - a0.goodput_bytes));
  r.set("rounds", static_cast<double>(a1.rounds - a0.rounds));
  r.set("rounds_per_s", rate(a0.rounds, a1.rounds, dt));
  const auto lat = gen::minus(t.stop.round_ns, t.start.round_ns);
  auto latency = object();
  latency->set("samples", static_cast<double>(gen::sample_count(lat)));
  latency->set("p50", static_cast<double>(gen::percentile(lat, 50)) / 1e3);
  latency->set("p99", static_cast<double>(gen::percentile(lat, 99)) / 1e3);
  r.set("round_latency_us", latency);
  if (open) {
    const uint64_t sent = ad.originals - a0.originals, back = ad.first_results - a0.first_results;
    r.set("offered_pps", rate(a0.originals, a1.originals, dt));
    r.set("loss", sent == 0 ? 0.0 : 1.0 - static_cast<double>(std::min(back, sent)) / static_cast<double>(sent));
  }
  // How often the generator's lcores found nothing to do: near 0 means the generator may be the bottleneck.
  const uint64_t loops = t.stop.loops - t.start.loops, idle = t.stop.idle_loops - t.start.idle_loops;
  r.set("generator_idle", loops == 0 ? 0.0 : static_cast<double>(idle) / static_cast<double>(loops));
  r.set("rx_echo_pps", rate(t.start.rx_echo, t.stop.rx_echo, dt));
  r.set("rx_echo_gbps", rate(t.start.rx_echo_bytes, t.stop.rx_echo_bytes, dt) * 8e-9);
  const std::pair<const char*, uint64_t JobTotals::*> step_counts[] = {
      {"pushes", &JobTotals::pushes},           {"retransmits", &JobTotals::retransmits},
      {"dropped_injected", &JobTotals::dropped}, {"duplicated_injected", &JobTotals::duplicated},
      {"inits", &JobTotals::inits},             {"results", &JobTotals::results},
      {"results_ok", &JobTotals::results_ok},   {"mismatches", &JobTotals::mismatches},
      {"duplicate_results", &JobTotals::results_dup}, {"unexpected_results", &JobTotals::results_unexpected},
      {"unverifiable", &JobTotals::unverifiable}, {"results_lost", &JobTotals::results_lost}};
  for (const auto& [name, field] : step_counts) r.set(name, static_cast<double>(a2.*field - a0.*field));
  auto errors = object();
  for (size_t e = 1; e < a2.errors.size(); ++e) {
    errors->set(std::string(proto::status_name(static_cast<proto::Status>(e))),
                static_cast<double>(a2.errors[e] - a0.errors[e]));
  }
  r.set("errors", errors);
  auto faults = object();
  for (size_t f = 0; f < gen::kFaultCount; ++f) {
    faults->set(std::string(gen::fault_name(static_cast<gen::Fault>(f))),
                static_cast<double>(t.settled.faults[f] - t.start.faults[f]));
  }
  r.set("faults_sent", faults);
  r.set("rx_malformed", static_cast<double>(t.settled.rx_malformed - t.start.rx_malformed));
  r.set("rx_bad_tag", static_cast<double>(t.settled.rx_bad_tag - t.start.rx_bad_tag));
  r.set("rx_replayed", static_cast<double>(t.settled.rx_replayed - t.start.rx_replayed));
  r.set("tx_full", static_cast<double>(t.settled.tx_full - t.start.tx_full));
  r.set("no_mbuf", static_cast<double>(t.settled.no_mbuf - t.start.no_mbuf));
  r.set("tx_recycled", static_cast<double>(t.settled.recycled - t.start.recycled));
  r.set("tx_recycle_busy", static_cast<double>(t.settled.recycle_busy - t.start.recycle_busy));
  r.set("settled", t.settled_ok);
  r.set("settle_s", t.settled.t_s - t.drained.t_s);
  auto jobs = list();
  for (size_t j = 0; j < g.jobs().size(); ++j) {
    const JobTotals &j0 = t.start.jobs[j], &j1 = t.stop.jobs[j], &j2 = t.settled.jobs[j];
    auto o = object();
    o->set("id", static_cast<double>(g.jobs()[j].wl.spec().id));
    o->set("name", g.jobs()[j].wl.spec().name);
    o->set("chunks", static_cast<double>(g.jobs()[j].wl.layout().chunk_count()));
    o->set("rounds", static_cast<double>(j2.rounds - j0.rounds));
    o->set("rounds_per_s", rate(j0.rounds, j1.rounds, dt));
    o->set("goodput_gbps", rate(j0.goodput_bytes, j1.goodput_bytes, dt) * 8e-9);
    o->set("results_ok", static_cast<double>(j2.results_ok - j0.results_ok));
    o->set("mismatches", static_cast<double>(j2.mismatches - j0.mismatches));
    o->set("retransmits", static_cast<double>(j2.retransmits - j0.retransmits));
    o->set("next_round", static_cast<double>(g.lcores().empty() ? 0 : g.lcores()[0]->partitions()[j]->next_round()));
    jobs->push(o);
  }
  r.set("jobs", jobs);
  return r;
}

std::string progress_line(const Totals& prev, const Totals& cur, double elapsed_s) {
  const double dt = cur.t_s - prev.t_s;
  const JobTotals a = prev.all(), b = cur.all();
  const auto lat = gen::minus(cur.round_ns, prev.round_ns);
  const uint64_t sent = b.originals - a.originals, back = b.first_results - a.first_results;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "[%6.1fs] tx %.3f Mpps rx %.3f Mpps | goodput %.3f Gbit/s | rounds %llu (%.0f/s) | "
                "p50 %.0f us p99 %.0f us | answered %.2f%% | retx %llu mism %llu",
                elapsed_s, rate(prev.tx_packets, cur.tx_packets, dt) / 1e6,
                rate(prev.rx_packets, cur.rx_packets, dt) / 1e6,
                rate(a.goodput_bytes, b.goodput_bytes, dt) * 8e-9, static_cast<unsigned long long>(b.rounds),
                rate(a.rounds, b.rounds, dt), static_cast<double>(gen::percentile(lat, 50)) / 1e3,
                static_cast<double>(gen::percentile(lat, 99)) / 1e3,
                sent == 0 ? 100.0 : 100.0 * static_cast<double>(std::min(back, sent)) / static_cast<double>(sent),
                static_cast<unsigned long long>(b.retransmits), static_cast<unsigned long long>(b.mismatches));
  return buf;
}

std::string human_summary(const Record& r) {
  const auto* lat = std::get_if<std::shared_ptr<Record>>(r.find("round_latency_us"));
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "summary: %.2f s, tx %.3f Mpps (%.3f Gbit/s), rx %.3f Mpps, goodput %.3f Gbit/s\n"
                "summary: rounds %.0f (%.1f/s), round latency p50 %.1f us p99 %.1f us\n"
                "summary: results %.0f ok %.0f, mismatches %.0f, duplicates %.0f, unexpected %.0f, retransmits %.0f, "
                "lost %.0f, settled %s\n",
                r.number("duration_s"), r.number("tx_pps") / 1e6, r.number("tx_gbps"), r.number("rx_pps") / 1e6,
                r.number("goodput_gbps"), r.number("rounds"), r.number("rounds_per_s"),
                lat ? (*lat)->number("p50") : 0.0, lat ? (*lat)->number("p99") : 0.0, r.number("results"),
                r.number("results_ok"), r.number("mismatches"), r.number("duplicate_results"),
                r.number("unexpected_results"), r.number("retransmits"), r.number("results_lost"),
                std::get_if<bool>(r.find("settled")) && std::get<bool>(*r.find("settled")) ? "yes" : "NO");
  std::string out = buf;
  if (r.find("loss") != nullptr) {
    std::snprintf(buf, sizeof buf, "summary: open loop offered %.3f Mpps, loss %.4f%%\n", r.number("offered_pps") / 1e6,
                  r.number("loss") * 100);
    out += buf;
  }
  return out;
}

}  // namespace phub::pktgen

// The counter table as Prometheus metric families, and the HTTP endpoint (see prometheus.hpp).
#include "phub/ctl/prometheus.hpp"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include "phub/base/ipv4.hpp"

namespace phub::ctl {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Counters counted in TSC cycles or nanoseconds are exported in seconds; gauges are named here.
bool is_gauge(std::string_view name) { return engine::is_max_counter(name); }
bool in_tsc(std::string_view name) { return name.ends_with("_tsc"); }
bool in_ns(std::string_view name) { return name.ends_with("_ns"); }
std::string seconds_name(std::string_view name) { return std::string(name.substr(0, name.rfind('_'))) + "_seconds"; }

MetricFamily family(std::string name, std::string_view help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::string(help);
  f.type = type;
  return f;
}

ClientMetric counter(std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = v;
  return m;
}

ClientMetric gauge(std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = v;
  return m;
}

void lcore_families(const engine::CounterReport& r, std::vector<MetricFamily>& out) {
  const double hz = r.tsc_hz != 0 ? static_cast<double>(r.tsc_hz) : 1.0;
  for (const auto& f : engine::kLcoreFields) {
    const bool g = is_gauge(f.name);
    const bool tsc = in_tsc(f.name);
    const bool ns = in_ns(f.name);
    std::string name = "phub_lcore_" + (tsc || ns ? seconds_name(f.name) : std::string(f.name)) + (g ? "" : "_total");
    if (f.name == "total_tsc") name = "phub_lcore_run_seconds_total";
    auto fam = family(std::move(name), f.help, g ? MetricType::Gauge : MetricType::Counter);
    for (const auto& l : r.lcores) {
      const double v = static_cast<double>(l.counters.*f.member) / (tsc ? hz : ns ? 1e9 : 1.0);
      std::vector<ClientMetric::Label> labels{{"lcore", std::to_string(l.lcore_id)}};
      fam.metric.push_back(g ? gauge(std::move(labels), v) : counter(std::move(labels), v));
    }
    out.push_back(std::move(fam));
  }
  auto gaps = family("phub_lcore_loop_gap_seconds",
                     "time between two quiescent states of the lcore's loop (idle sleeps excluded)", MetricType::Histogram);
  for (const auto& l : r.lcores) {
    ClientMetric h;
    h.label = {{"lcore", std::to_string(l.lcore_id)}};
    uint64_t cumulative = 0;
    for (size_t b = 0; b < engine::kGapBuckets; ++b) {
      cumulative += l.counters.loop_gaps[b];
      const double bound = b < engine::kGapBoundsUs.size() ? static_cast<double>(engine::kGapBoundsUs[b]) / 1e6
                                                           : std::numeric_limits<double>::infinity();
      h.histogram.bucket.push_back({cumulative, bound});
    }
    h.histogram.sample_count = cumulative;
    h.histogram.sample_sum = 0;  // not kept: the buckets and phub_lcore_max_gap_seconds say what matters
    gaps.metric.push_back(std::move(h));
  }
  out.push_back(std::move(gaps));
  auto busy = family("phub_lcore_busy_ratio", "share of the lcore's loop time spent in iterations that found work",
                     MetricType::Gauge);
  for (const auto& l : r.lcores) {
    const double total = static_cast<double>(l.counters.total_tsc);
    busy.metric.push_back(gauge({{"lcore", std::to_string(l.lcore_id)}},
                                total > 0 ? static_cast<double>(l.counters.busy_tsc) / total : 0.0));
  }
  out.push_back(std::move(busy));
  for (const bool rx : {true, false}) {
    auto msgs = family(rx ? "phub_lcore_rx_messages_total" : "phub_lcore_tx_messages_total",
                       rx ? "phub messages the lcore handled, by opcode" : "frames the lcore's ports took, by phub opcode "
                                                                          "(other: not a phub message)",
                       MetricType::Counter);
    for (const auto& l : r.lcores) {
      const auto& n = rx ? l.counters.rx_messages : l.counters.tx_messages;
      for (size_t op = rx ? 1 : 0; op < engine::kOpcodeSlots; ++op) {
        msgs.metric.push_back(counter({{"lcore", std::to_string(l.lcore_id)},
                                       {"opcode", std::string(engine::message_slot_name(op))}},
                                      static_cast<double>(n[op])));
      }
    }
    out.push_back(std::move(msgs));
  }
}

void job_families(const engine::CounterReport& r, std::vector<MetricFamily>& out) {
  auto labels = [](const engine::CounterReport::Job& j) {
    return std::vector<ClientMetric::Label>{{"job_name", j.name}, {"job_id", std::to_string(j.id)}};
  };
  for (const auto& f : engine::kJobFields) {
    if (f.name == "round_latency_sum_ns") continue;  // part of the histogram below
    auto fam = family("phub_job_" + std::string(f.name) + "_total", f.help, MetricType::Counter);
    for (const auto& j : r.jobs) fam.metric.push_back(counter(labels(j), static_cast<double>(j.counters.*f.member)));
    out.push_back(std::move(fam));
  }
  auto epoch = family("phub_job_epoch", "the job's epoch (the newest of its lcores)", MetricType::Gauge);
  auto open = family("phub_job_open_rounds", "chunks with a round in progress", MetricType::Gauge);
  auto draining = family("phub_job_draining", "1 while the job starts no new round", MetricType::Gauge);
  auto latency = family("phub_job_round_latency_seconds", "a chunk round's time from its first contribution to its result",
                        MetricType::Histogram);
  for (const auto& j : r.jobs) {
    epoch.metric.push_back(gauge(labels(j), j.epoch));
    open.metric.push_back(gauge(labels(j), static_cast<double>(j.open_rounds)));
    draining.metric.push_back(gauge(labels(j), j.draining ? 1.0 : 0.0));
    ClientMetric h;
    h.label = labels(j);
    uint64_t cumulative = 0;
    for (size_t b = 0; b < engine::kLatencyBuckets; ++b) {
      cumulative += j.counters.round_latency[b];
      const double bound = b < engine::kLatencyBoundsUs.size() ? static_cast<double>(engine::kLatencyBoundsUs[b]) / 1e6
                                                               : std::numeric_limits<double>::infinity();
      h.histogram.bucket.push_back({cumulative, bound});
    }
    h.histogram.sample_count = cumulative;
    h.histogram.sample_sum = static_cast<double>(j.counters.round_latency_sum_ns) / 1e9;
    latency.metric.push_back(std::move(h));
  }
  for (auto* f : {&epoch, &open, &draining, &latency}) out.push_back(std::move(*f));
}

// Hierarchical jobs: one series per (job, peer hub) for each field of engine::kHubPeerFields.
void hub_families(const engine::CounterReport& r, std::vector<MetricFamily>& out) {
  for (const auto& f : engine::kHubPeerFields) {
    auto fam = family("phub_hub_" + std::string(f.name) + (f.gauge ? "" : "_total"), f.help,
                      f.gauge ? MetricType::Gauge : MetricType::Counter);
    for (const auto& j : r.jobs) {
      for (const auto& h : j.hubs) {
        std::vector<ClientMetric::Label> labels{{"job_name", j.name}, {"job_id", std::to_string(j.id)},
                                                {"rack", h.rack}, {"hub", format_ipv4(h.ipv4)}};
        const auto v = static_cast<double>(f.get(h));
        fam.metric.push_back(f.gauge ? gauge(std::move(labels), v) : counter(std::move(labels), v));
      }
    }
    out.push_back(std::move(fam));
  }
}

void drop_families(const engine::CounterReport& r, std::vector<MetricFamily>& out) {
  auto drops = family("phub_drops_total", "packets not used, by reason; per job once the UDP port named the job",
                      MetricType::Counter);
  for (size_t d = 0; d < engine::kDropCount; ++d) {
    const std::string reason(engine::drop_name(static_cast<engine::Drop>(d)));
    uint64_t unowned = 0;
    for (const auto& l : r.lcores) unowned += l.counters.drops[d];
    drops.metric.push_back(counter({{"reason", reason}, {"job_name", ""}}, static_cast<double>(unowned)));
    for (const auto& j : r.jobs) {
      drops.metric.push_back(counter({{"reason", reason}, {"job_name", j.name}}, static_cast<double>(j.counters.drops[d])));
    }
  }
  out.push_back(std::move(drops));
  auto malformed = family("phub_malformed_total", "frames that failed to parse, by reason", MetricType::Counter);
  for (size_t e = 0; e < proto::kParseErrorCount; ++e) {
    uint64_t n = 0;
    for (const auto& l : r.lcores) n += l.counters.malformed[e];
    malformed.metric.push_back(
        counter({{"reason", std::string(proto::parse_error_name(static_cast<proto::ParseError>(e)))}}, static_cast<double>(n)));
  }
  out.push_back(std::move(malformed));
}

void port_families(const engine::CounterReport& r, std::vector<MetricFamily>& out) {
  for (const auto& f : drivers::kPortStatFields) {
    auto fam = family("phub_port_" + std::string(f.name) + "_total", std::string(f.help), MetricType::Counter);
    for (const auto& p : r.ports) fam.metric.push_back(counter({{"port", p.name}}, static_cast<double>(p.stats.*f.member)));
    out.push_back(std::move(fam));
  }
}

void pool_families(const engine::CounterReport& r, std::vector<MetricFamily>& out) {
  auto in_use = family("phub_mempool_in_use", "mbufs out of the pool (in flight, queued or held)", MetricType::Gauge);
  auto avail = family("phub_mempool_avail", "mbufs in the pool, per-lcore caches included", MetricType::Gauge);
  for (const auto& p : r.pools) {
    in_use.metric.push_back(gauge({{"pool", p.name}}, static_cast<double>(p.in_use)));
    avail.metric.push_back(gauge({{"pool", p.name}}, static_cast<double>(p.avail)));
  }
  out.push_back(std::move(in_use));
  out.push_back(std::move(avail));
}

}  // namespace

std::vector<MetricFamily> metric_families(const engine::CounterReport& r) {
  std::vector<MetricFamily> out;
  lcore_families(r, out);
  job_families(r, out);
  hub_families(r, out);
  drop_families(r, out);
  port_families(r, out);
  pool_families(r, out);
  return out;
}

constexpr int kMetricsThreads = 4;
constexpr int kMetricsIoTimeoutMs = 2000;

class CacheCollectable : public prometheus::Collectable {
 public:
  explicit CacheCollectable(const CounterCache& cache) : cache_(cache) {}
  std::vector<MetricFamily> Collect() const override {
    const auto s = cache_.latest();
    if (!s) return {};
    auto out = metric_families(s->report);
    auto seq = family("phub_sample_sequence",
                      "sequence number of the counter sample these values come from (`sample` in phub-ctl stats --json "
                      "and in the /phub/ telemetry answers)",
                      MetricType::Gauge);
    seq.metric.push_back(gauge({}, static_cast<double>(s->sequence)));
    out.push_back(std::move(seq));
    return out;
  }

 private:
  const CounterCache& cache_;
};

Expected<std::unique_ptr<MetricsEndpoint>, std::string> MetricsEndpoint::open(const std::string& address,
                                                                             const CounterCache& cache) {
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  try {
    // Several threads, and a timeout on every read and write: a client that connects and then sends or reads
    // slowly holds one thread for at most the timeout while the others keep serving Prometheus.
    e->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", std::to_string(kMetricsThreads), "request_timeout_ms",
        std::to_string(kMetricsIoTimeoutMs)});
  } catch (const std::exception& ex) {
    return unexpected("control.metrics_address: cannot listen on " + address + ": " + ex.what());
  }
  e->collectable_ = std::make_shared<CacheCollectable>(cache);
  e->exposer_->RegisterCollectable(e->collectable_);
  return e;
}

MetricsEndpoint::~MetricsEndpoint() = default;

int MetricsEndpoint::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace phub::ctl

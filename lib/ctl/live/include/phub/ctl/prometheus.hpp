// The Prometheus endpoint: the counter table as metric families, served over HTTP by prometheus-cpp's
// exposer (bound to 127.0.0.1 unless the config says otherwise).
#pragma once

#include <prometheus/metric_family.h>

#include <memory>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/ctl/counter_cache.hpp"

namespace prometheus {
class Exposer;
}

namespace phub::ctl {

// Every counter of the report as Prometheus families (pure): phub_lcore_*, phub_job_*, phub_drops_total,
// phub_malformed_total, phub_port_*, and each job's round latency histogram.
[[nodiscard]] std::vector<prometheus::MetricFamily> metric_families(const engine::CounterReport& r);

class MetricsEndpoint {
 public:
  // Listens on `address` ("127.0.0.1:9464"; port 0 picks a free one) and serves `cache`'s latest sample: its
  // metric_families and phub_sample_sequence, the sample's sequence number.
  [[nodiscard]] static Expected<std::unique_ptr<MetricsEndpoint>, std::string> open(const std::string& address,
                                                                                   const CounterCache& cache);
  ~MetricsEndpoint();
  [[nodiscard]] int port() const;

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<class CacheCollectable> collectable_;
};

}  // namespace phub::ctl

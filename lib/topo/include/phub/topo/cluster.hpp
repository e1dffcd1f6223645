// Clustering of an RTT (and bandwidth) matrix into locality groups, choosing the number of groups itself.
#pragma once

#include <vector>

#include "phub/topo/matrix.hpp"

namespace phub::topo {

struct ClusterOptions {
  double min_separation = 1.5;        // split only if the next level is this many times further away
  double max_missing_fraction = 0.5;  // exclude a host with more of its pairs missing than this
  double flaky_loss = 0.2;            // flag a host whose mean probe loss is above this
};

struct Clustering {
  std::vector<int> group;          // per host: 0..groups-1 (numbered by first host), -1 = excluded
  std::vector<double> confidence;  // per host, 0..1; 0 for excluded hosts
  std::vector<bool> flagged;       // some pairs missing or lossy, yet planned
  int groups = 0;
  double separation = 1.0;         // distance ratio across the chosen cut (largest found if groups == 1)
};

// Agglomerative clustering on log(minimum RTT) dissimilarities (plus log of the bandwidth deficit when bandwidth
// was measured), with the lower quartile of the cross pairs as the linkage, so that inflated (queued)
// pairs cannot keep members of one group apart. The cut is the largest gap between successive
// merge heights; it is taken only when that gap is at least log(min_separation), else one group.
[[nodiscard]] Clustering cluster(const Matrix& m, const ClusterOptions& opts = {});

// Hosts that take part in plans (group >= 0), in matrix order.
[[nodiscard]] std::vector<size_t> included_hosts(const Clustering& c);

}  // namespace phub::topo

// One call from a measured matrix to groups, ring/tree/rack plans and their predicted costs.
#pragma once

#include <cstdint>

#include "phub/topo/cluster.hpp"
#include "phub/topo/cost.hpp"
#include "phub/topo/racks.hpp"
#include "phub/topo/ring.hpp"
#include "phub/topo/tree.hpp"

namespace phub::topo {

struct PlanOptions {
  ClusterOptions cluster;
  double model_bytes = 64.0 * 1024 * 1024;  // allreduce size for the predicted costs
  double default_bw_bytes_per_s = 1.25e9;   // 10 Gbit/s where bandwidth was not measured
  int random_orders = 101;
  uint64_t seed = 1;
};

// Predicted allreduce time of the plan, of the given (identity) order and of the median random order.
struct Predicted {
  double planned_s = 0.0;
  double identity_s = 0.0;
  double random_median_s = 0.0;
};

// Every index is a row of the input matrix; excluded hosts appear only in clustering.
struct Plan {
  Clustering clustering;
  std::vector<size_t> ring;  // rank order
  bool ring_exact = false;
  double ring_weight_us = 0.0;
  Predicted ring_cost;
  TreePlan tree;
  Predicted tree_cost;
  RackPlan racks;
};

[[nodiscard]] Plan plan(const Matrix& m, const PlanOptions& opts = {});

}  // namespace phub::topo

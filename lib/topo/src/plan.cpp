// The planning pipeline: cluster, drop excluded hosts, plan ring/tree/racks, predict costs.
#include "phub/topo/plan.hpp"

#include <numeric>

namespace phub::topo {
namespace {

std::vector<size_t> to_matrix(const std::vector<size_t>& in, std::span<const size_t> idx) {
  std::vector<size_t> out;
  for (size_t i : idx) out.push_back(in[i]);
  return out;
}

template <class CostFn>
Predicted predict(size_t n, std::span<const size_t> planned, const PlanOptions& opts, CostFn cost) {
  std::vector<size_t> identity(n);
  std::iota(identity.begin(), identity.end(), size_t{0});
  return {cost(planned), cost(identity), random_median_s(n, opts.random_orders, opts.seed, cost)};
}

}  // namespace

Plan plan(const Matrix& m, const PlanOptions& opts) {
  Plan out;
  out.clustering = cluster(m, opts.cluster);
  const std::vector<size_t> in = included_hosts(out.clustering);
  if (in.empty()) return out;
  const Matrix sub = m.subset(in);
  std::vector<int> group;
  for (size_t i : in) group.push_back(out.clustering.group[i]);
  const Square w = sub.weights_us();

  const RingPlan ring = plan_ring(w, group);
  const LinkModel lm = make_link_model(sub, group, opts.default_bw_bytes_per_s);
  const double bytes = opts.model_bytes;
  out.ring_exact = ring.exact;
  out.ring_weight_us = ring.weight;
  out.ring_cost = predict(in.size(), ring.order, opts,
                          [&](std::span<const size_t> o) { return ring_allreduce_s(lm, o, bytes); });
  const TreePlan tree = plan_tree(lm, w, ring.order, bytes);
  out.tree_cost = predict(in.size(), tree.order, opts,
                          [&](std::span<const size_t> o) { return tree_allreduce_s(lm, o, bytes); });
  const RackPlan racks = plan_racks(w, group, ring.order);

  out.ring = to_matrix(in, ring.order);
  out.tree = {to_matrix(in, tree.order), tree.parent};
  for (const auto& members : racks.members) out.racks.members.push_back(to_matrix(in, members));
  out.racks.hub = to_matrix(in, racks.hub);
  return out;
}

}  // namespace phub::topo

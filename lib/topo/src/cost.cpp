// Alpha-beta collective cost model with per-group uplink sharing.
#include "phub/topo/cost.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace phub::topo {

LinkModel make_link_model(const Matrix& m, std::span<const int> group, double default_bw_bytes_per_s) {
  LinkModel lm{Square(m.size()), Square(m.size(), default_bw_bytes_per_s), {group.begin(), group.end()}};
  double alpha_max = 0.0, beta_min = default_bw_bytes_per_s;
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m.size(); ++j) {
      const PairStats& p = m.at(i, j);
      if (i == j || !p.present) continue;
      lm.alpha_s.at(i, j) = p.min_us * 0.5e-6;
      alpha_max = std::max(alpha_max, lm.alpha_s.at(i, j));
      if (p.bw_bytes_per_s > 0.0) lm.beta_bytes_per_s.at(i, j) = p.bw_bytes_per_s;
      beta_min = std::min(beta_min, lm.beta_bytes_per_s.at(i, j));
    }
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m.size(); ++j)
      if (i != j && !m.at(i, j).present) {
        lm.alpha_s.at(i, j) = 2.0 * alpha_max;
        lm.beta_bytes_per_s.at(i, j) = 0.5 * beta_min;
      }
  return lm;
}

double step_time_s(const LinkModel& lm, std::span<const Transfer> transfers, double bytes) {
  const int groups = lm.group.empty() ? 0 : *std::max_element(lm.group.begin(), lm.group.end()) + 1;
  std::vector<int> out_cross(static_cast<size_t>(std::max(groups, 1)), 0), in_cross(out_cross);
  for (const auto& [from, to] : transfers)
    if (lm.group[from] != lm.group[to]) {
      ++out_cross[static_cast<size_t>(lm.group[from])];
      ++in_cross[static_cast<size_t>(lm.group[to])];
    }
  double worst = 0.0;
  for (const auto& [from, to] : transfers) {
    int share = 1;
    if (lm.group[from] != lm.group[to])
      share = std::max(out_cross[static_cast<size_t>(lm.group[from])], in_cross[static_cast<size_t>(lm.group[to])]);
    const double t = lm.alpha_s.at(from, to) + bytes * share / lm.beta_bytes_per_s.at(from, to);
    worst = std::max(worst, t);
  }
  return worst;
}

double ring_allreduce_s(const LinkModel& lm, std::span<const size_t> order, double bytes) {
  const size_t n = order.size();
  if (n < 2) return 0.0;
  std::vector<Transfer> transfers;
  for (size_t r = 0; r < n; ++r) transfers.emplace_back(order[r], order[(r + 1) % n]);
  return 2.0 * static_cast<double>(n - 1) * step_time_s(lm, transfers, bytes / static_cast<double>(n));
}

double tree_allreduce_s(const LinkModel& lm, std::span<const size_t> order, double bytes) {
  const size_t n = order.size();
  double total = 0.0;
  std::vector<Transfer> transfers;
  for (size_t dist = 1; dist < n; dist *= 2) {
    transfers.clear();
    for (size_t r = 0; r + dist < n; r += 2 * dist) transfers.emplace_back(order[r + dist], order[r]);
    total += step_time_s(lm, transfers, bytes);
  }
  return 2.0 * total;  // the broadcast mirrors the reduce
}

double random_median_s(size_t n, int samples, uint64_t seed,
                       const std::function<double(std::span<const size_t>)>& cost) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<double> costs;
  for (int s = 0; s < std::max(samples, 1); ++s) {
    std::shuffle(order.begin(), order.end(), rng);
    costs.push_back(cost(order));
  }
  std::nth_element(costs.begin(), costs.begin() + static_cast<long>(costs.size() / 2), costs.end());
  return costs[costs.size() / 2];
}

}  // namespace phub::topo

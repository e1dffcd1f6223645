// Adjusted Rand index (Hubert and Arabie) from the contingency table of two labelings.
#include "phub/topo/ari.hpp"

#include <map>
#include <utility>

namespace phub::topo {
namespace {

double choose2(double x) { return x * (x - 1.0) / 2.0; }

}  // namespace

double adjusted_rand_index(std::span<const int> a, std::span<const int> b) {
  std::map<std::pair<int, int>, double> both;
  std::map<int, double> rows, cols;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    both[{a[i], b[i]}] += 1.0;
    rows[a[i]] += 1.0;
    cols[b[i]] += 1.0;
  }
  double index = 0.0, sum_rows = 0.0, sum_cols = 0.0;
  for (const auto& [key, count] : both) index += choose2(count);
  for (const auto& [key, count] : rows) sum_rows += choose2(count);
  for (const auto& [key, count] : cols) sum_cols += choose2(count);
  const double total = choose2(static_cast<double>(a.size()));
  if (total == 0.0) return 1.0;
  const double expected = sum_rows * sum_cols / total;
  const double max_index = 0.5 * (sum_rows + sum_cols);
  if (max_index == expected) return 1.0;  // both trivial (all one group or all singletons) and equal
  return (index - expected) / (max_index - expected);
}

}  // namespace phub::topo

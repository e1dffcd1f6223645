// A dense square matrix of doubles indexed by host, the common currency of the planners.
#pragma once

#include <cstddef>
#include <vector>

namespace phub::topo {

struct Square {
  size_t n = 0;
  std::vector<double> v;

  Square() = default;
  explicit Square(size_t size, double fill = 0.0) : n(size), v(size * size, fill) {}
  [[nodiscard]] double& at(size_t i, size_t j) { return v[i * n + j]; }
  [[nodiscard]] double at(size_t i, size_t j) const { return v[i * n + j]; }
};

}  // namespace phub::topo

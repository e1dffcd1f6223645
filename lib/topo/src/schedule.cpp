// Round-robin tournament schedule by the circle method.
#include "phub/topo/schedule.hpp"

#include <algorithm>

namespace phub::topo {

std::vector<std::vector<std::pair<size_t, size_t>>> tournament_rounds(size_t n) {
  std::vector<std::vector<std::pair<size_t, size_t>>> rounds;
  if (n < 2) return rounds;
  const size_t m = n % 2 == 0 ? n : n + 1;  // a phantom host m-1 = n marks the bye when n is odd
  for (size_t r = 0; r + 1 < m; ++r) {
    std::vector<std::pair<size_t, size_t>> round;
    // Host m-1 stays fixed; the others rotate: position p holds host (p + r) mod (m-1).
    auto at = [&](size_t p) { return p == m - 1 ? m - 1 : (p + r) % (m - 1); };
    for (size_t p = 0; p < m / 2; ++p) {
      const size_t a = at(p), b = at(m - 1 - p);
      if (a < n && b < n) round.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(std::move(round));
  }
  return rounds;
}

}  // namespace phub::topo

// Probe schedule: all pairs of n hosts in rounds of disjoint pairs (round-robin tournament).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace phub::topo {

// The circle method: n-1 rounds for even n, n rounds for odd n (one host sits out each round). Every
// unordered pair appears exactly once and no host appears twice in a round. Pairs are (lower, higher).
[[nodiscard]] std::vector<std::vector<std::pair<size_t, size_t>>> tournament_rounds(size_t n);

}  // namespace phub::topo

// Local search on a group-contiguous ring: 2-opt, Or-opt and exact re-solving of small arcs.
#pragma once

#include <span>
#include <vector>

#include "phub/topo/square.hpp"

namespace phub::topo::detail {

// Improves `order` in place until no move helps; every move keeps each group in one arc.
// Arcs of 3..exact_arc_max hosts are also re-solved exactly (Held-Karp) between their two neighbours.
void improve_ring(const Square& w, std::span<const int> group, std::vector<size_t>& order, size_t exact_arc_max);

}  // namespace phub::topo::detail

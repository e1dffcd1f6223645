// Rank order for binomial-tree collectives: groups as aligned blocks, each led by its most central host.
#pragma once

#include <span>
#include <vector>

#include "phub/topo/cost.hpp"

namespace phub::topo {

struct TreePlan {
  std::vector<size_t> order;  // host indices in rank order; rank 0 is the root
  std::vector<long> parent;   // per rank: the parent rank in the binomial tree, -1 for the root
};

// The binomial parent of a rank: the rank with its lowest set bit cleared.
[[nodiscard]] std::vector<long> binomial_parents(size_t n);

// Keeps each group contiguous and puts its leader (smallest total weight to its members) first, members
// in their ring order. Tries every group order when there are at most 7 groups (else largest first) and
// keeps the order with the lowest modelled tree allreduce time.
[[nodiscard]] TreePlan plan_tree(const LinkModel& lm, const Square& w, std::span<const size_t> ring_order,
                                 double bytes);

}  // namespace phub::topo

// Adjusted Rand index between two labelings (1.0 = identical partitions up to renaming).
#pragma once

#include <span>

namespace phub::topo {

// Labels < 0 (excluded hosts) are treated as one more label. Both spans must have the same length.
[[nodiscard]] double adjusted_rand_index(std::span<const int> a, std::span<const int> b);

}  // namespace phub::topo

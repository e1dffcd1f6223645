// Alpha-beta cost model of ring and binomial-tree allreduce over a measured matrix, with uplink contention.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "phub/topo/matrix.hpp"

namespace phub::topo {

// Per-pair latency and bandwidth, plus the locality group of each host. Transfers that leave a group at
// the same time share that group's uplink: a transfer's bandwidth is divided by the number of concurrent
// transfers leaving its source group (or entering its destination group, whichever is larger).
struct LinkModel {
  Square alpha_s;           // one-way latency: half the minimum RTT
  Square beta_bytes_per_s;  // measured bandwidth, or the default where not measured
  std::vector<int> group;
};

// Missing pairs get twice the largest latency and half the smallest bandwidth.
[[nodiscard]] LinkModel make_link_model(const Matrix& m, std::span<const int> group, double default_bw_bytes_per_s);

using Transfer = std::pair<size_t, size_t>;  // (from, to)

// Time of one step in which all transfers run at once, each of `bytes`.
[[nodiscard]] double step_time_s(const LinkModel& lm, std::span<const Transfer> transfers, double bytes);

// Ring allreduce (reduce-scatter then allgather): 2(N-1) steps of bytes/N, rank r sending to rank r+1.
[[nodiscard]] double ring_allreduce_s(const LinkModel& lm, std::span<const size_t> order, double bytes);

// Binomial-tree allreduce rooted at rank 0: reduce then broadcast, ceil(log2 N) steps each, full bytes.
[[nodiscard]] double tree_allreduce_s(const LinkModel& lm, std::span<const size_t> order, double bytes);

// Median cost of `samples` uniformly random orders of n hosts (deterministic for a seed).
[[nodiscard]] double random_median_s(size_t n, int samples, uint64_t seed,
                                     const std::function<double(std::span<const size_t>)>& cost);

}  // namespace phub::topo

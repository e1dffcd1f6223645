// Pairwise RTT (and optional bandwidth) measurements between the hosts of a job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/topo/square.hpp"

namespace phub::topo {

struct Host {
  std::string name;  // as the user named it (defaults to the address)
  std::string addr;  // IPv4 literal the agent listens on
  uint16_t port = 0;
};

// Robust statistics of the RTT samples of one pair (probe requests sent by one side).
struct PairStats {
  bool present = false;       // at least one reply arrived
  double min_us = 0.0;
  double median_us = 0.0;
  double p90_us = 0.0;
  uint32_t sent = 0;
  uint32_t received = 0;
  double bw_bytes_per_s = 0.0;  // short bulk transfer; 0 = not measured

  [[nodiscard]] double loss() const noexcept {
    return sent == 0 ? 0.0 : 1.0 - static_cast<double>(received) / static_cast<double>(sent);
  }
};

// Sorts a copy of the samples and returns min, median and p90 (nearest rank).
[[nodiscard]] PairStats summarize(std::span<const double> rtt_us, uint32_t sent);

// A symmetric matrix of PairStats; the diagonal is present with zero RTT.
class Matrix {
 public:
  Matrix() = default;
  explicit Matrix(std::vector<Host> hosts);

  [[nodiscard]] size_t size() const noexcept { return hosts_.size(); }
  [[nodiscard]] const std::vector<Host>& hosts() const noexcept { return hosts_; }
  [[nodiscard]] const PairStats& at(size_t i, size_t j) const { return pairs_[i * hosts_.size() + j]; }
  void set(size_t i, size_t j, const PairStats& s);  // sets (i,j) and (j,i)

  [[nodiscard]] bool has_bandwidth() const noexcept;        // some off-diagonal pair has a bandwidth
  [[nodiscard]] size_t missing_of(size_t i) const noexcept;  // pairs of host i without a reply
  [[nodiscard]] Matrix subset(std::span<const size_t> idx) const;

  // Planning weight of each pair: the median RTT in us; a missing pair costs twice the largest
  // present median (so plans avoid it without refusing to plan).
  [[nodiscard]] Square weights_us() const;

 private:
  std::vector<Host> hosts_;
  std::vector<PairStats> pairs_;
};

}  // namespace phub::topo

// Matrix storage, sample summaries and planning weights.
#include "phub/topo/matrix.hpp"

#include <algorithm>
#include <cmath>

namespace phub::topo {

PairStats summarize(std::span<const double> rtt_us, uint32_t sent) {
  PairStats s;
  s.sent = sent;
  s.received = static_cast<uint32_t>(rtt_us.size());
  if (rtt_us.empty()) return s;
  std::vector<double> v(rtt_us.begin(), rtt_us.end());
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(k, 1, v.size()) - 1];
  };
  s.present = true;
  s.min_us = v.front();
  s.median_us = rank(0.5);
  s.p90_us = rank(0.9);
  return s;
}

Matrix::Matrix(std::vector<Host> hosts) : hosts_(std::move(hosts)), pairs_(hosts_.size() * hosts_.size()) {
  for (size_t i = 0; i < hosts_.size(); ++i) pairs_[i * hosts_.size() + i].present = true;
}

void Matrix::set(size_t i, size_t j, const PairStats& s) {
  pairs_[i * hosts_.size() + j] = s;
  pairs_[j * hosts_.size() + i] = s;
}

bool Matrix::has_bandwidth() const noexcept {
  for (size_t i = 0; i < size(); ++i)
    for (size_t j = i + 1; j < size(); ++j)
      if (at(i, j).bw_bytes_per_s > 0.0) return true;
  return false;
}

size_t Matrix::missing_of(size_t i) const noexcept {
  size_t missing = 0;
  for (size_t j = 0; j < size(); ++j) missing += at(i, j).present ? 0 : 1;
  return missing;
}

Matrix Matrix::subset(std::span<const size_t> idx) const {
  std::vector<Host> hosts;
  for (size_t i : idx) hosts.push_back(hosts_[i]);
  Matrix out(std::move(hosts));
  for (size_t a = 0; a < idx.size(); ++a)
    for (size_t b = a + 1; b < idx.size(); ++b) out.set(a, b, at(idx[a], idx[b]));
  return out;
}

Square Matrix::weights_us() const {
  Square w(size());
  double largest = 0.0;
  for (const auto& p : pairs_)
    if (p.present) largest = std::max(largest, p.median_us);
  const double penalty = largest > 0.0 ? 2.0 * largest : 1.0;
  for (size_t i = 0; i < size(); ++i)
    for (size_t j = 0; j < size(); ++j)
      w.at(i, j) = i == j ? 0.0 : (at(i, j).present ? at(i, j).median_us : penalty);
  return w;
}

}  // namespace phub::topo

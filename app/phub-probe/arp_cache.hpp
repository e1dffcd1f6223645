// A small fixed-size ARP table for the DPDK probe agent: IPv4 address -> MAC with an expiry, no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "phub/base/mac.hpp"

namespace phub::probe {

class ArpCache {
 public:
  // Entries live `ttl` time units (the caller's clock: TSC cycles in the agent).
  explicit ArpCache(uint64_t ttl) : ttl_(ttl) {}

  void learn(uint32_t ip, const MacAddr& mac, uint64_t now) noexcept {
    for (Entry& e : entries_)
      if (e.ip == ip) {
        e = Entry{ip, mac, now + ttl_};
        return;
      }
    entries_[next_] = Entry{ip, mac, now + ttl_};  // a new address takes the oldest slot
    next_ = (next_ + 1) % entries_.size();
  }

  [[nodiscard]] const MacAddr* find(uint32_t ip, uint64_t now) const noexcept {
    for (const Entry& e : entries_)
      if (e.ip == ip && ip != 0 && now < e.expires) return &e.mac;
    return nullptr;
  }

 private:
  struct Entry {
    uint32_t ip = 0;
    MacAddr mac{};
    uint64_t expires = 0;
  };
  uint64_t ttl_;
  std::array<Entry, 64> entries_{};
  size_t next_ = 0;
};

}  // namespace phub::probe

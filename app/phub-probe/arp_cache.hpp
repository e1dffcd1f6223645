// A small fixed-size ARP table for the DPDK probe agent: IPv4 address -> MAC with an expiry, no allocation.
// It learns only answers to its own questions: an address enters the table from a reply to a request the
// station sent (and still waits for), and from nothing else.
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

  // The station asked who has `ip`; a reply is welcome until `until`.
  void expect(uint32_t ip, uint64_t until) noexcept {
    Pending* slot = &pending_[0];
    for (Pending& p : pending_) {
      if (p.ip == ip) {
        slot = &p;
        break;
      }
      if (p.until < slot->until) slot = &p;  // else the one that expires first
    }
    *slot = Pending{ip, until};
  }

  // A reply: `ip` is at `mac`. Learnt, and true, only if the station is waiting for `ip` (which it then no
  // longer is: a second reply changes nothing); false and nothing changes otherwise.
  bool learn_reply(uint32_t ip, const MacAddr& mac, uint64_t now) noexcept {
    for (Pending& p : pending_)
      if (p.ip == ip && ip != 0 && now < p.until) {
        p = Pending{};
        store(ip, mac, now);
        return true;
      }
    return false;
  }

  [[nodiscard]] const MacAddr* find(uint32_t ip, uint64_t now) const noexcept {
    for (const Entry& e : entries_)
      if (e.ip == ip && ip != 0 && now < e.expires) return &e.mac;
    return nullptr;
  }

 private:
  void store(uint32_t ip, const MacAddr& mac, uint64_t now) noexcept {
    for (Entry& e : entries_)
      if (e.ip == ip) {
        e = Entry{ip, mac, now + ttl_};
        return;
      }
    entries_[next_] = Entry{ip, mac, now + ttl_};  // a new address takes the oldest slot
    next_ = (next_ + 1) % entries_.size();
  }

  struct Entry {
    uint32_t ip = 0;
    MacAddr mac{};
    uint64_t expires = 0;
  };
  struct Pending {
    uint32_t ip = 0;
    uint64_t until = 0;
  };
  uint64_t ttl_;
  std::array<Entry, 64> entries_{};
  std::array<Pending, 8> pending_{};
  size_t next_ = 0;
};

}  // namespace phub::probe

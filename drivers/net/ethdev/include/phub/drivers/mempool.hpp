// RAII ownership of a DPDK packet mempool.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>

#include "phub/base/expected.hpp"

namespace phub::drivers {

class Mempool {
 public:
  Mempool() = default;
  // A pktmbuf pool of `mbufs` buffers with `data_room_bytes` each (0 for mbufs that only attach external
  // buffers), a per-lcore cache, on `socket`. A private area of `priv_bytes` (a multiple of 8) between each
  // mbuf and its buffer moves where frames start within a cache line.
  [[nodiscard]] static Expected<Mempool, std::string> create(const std::string& name, uint32_t mbufs,
                                                             uint16_t data_room_bytes, int socket,
                                                             unsigned cache = 256, uint16_t priv_bytes = 0);
  ~Mempool();
  Mempool(Mempool&& o) noexcept : pool_(o.pool_) { o.pool_ = nullptr; }
  Mempool& operator=(Mempool&& o) noexcept;
  Mempool(const Mempool&) = delete;
  Mempool& operator=(const Mempool&) = delete;

  [[nodiscard]] rte_mempool* get() const noexcept { return pool_; }
  [[nodiscard]] unsigned available() const noexcept;
  [[nodiscard]] unsigned in_use() const noexcept;

 private:
  explicit Mempool(rte_mempool* p) : pool_(p) {}
  rte_mempool* pool_ = nullptr;
};

}  // namespace phub::drivers

// RAII ownership of a DPDK packet mempool.
#include "phub/drivers/mempool.hpp"

#include <rte_errno.h>
#include <rte_mbuf.h>

namespace phub::drivers {

Expected<Mempool, std::string> Mempool::create(const std::string& name, uint32_t mbufs, uint16_t data_room_bytes,
                                               int socket, unsigned cache, uint16_t priv_bytes) {
  const unsigned cache_size = std::min<unsigned>(cache, RTE_MEMPOOL_CACHE_MAX_SIZE);
  rte_mempool* p = rte_pktmbuf_pool_create(name.c_str(), mbufs, std::min<unsigned>(cache_size, mbufs / 2),
                                           priv_bytes, data_room_bytes, socket);
  if (p == nullptr) {
    return unexpected("mempool " + name + ": cannot create " + std::to_string(mbufs) + " mbufs of " +
                      std::to_string(data_room_bytes) + " bytes: " + rte_strerror(rte_errno));
  }
  return Mempool(p);
}

Mempool::~Mempool() {
  if (pool_ != nullptr) rte_mempool_free(pool_);
}

Mempool& Mempool::operator=(Mempool&& o) noexcept {
  if (this != &o) {
    if (pool_ != nullptr) rte_mempool_free(pool_);
    pool_ = o.pool_;
    o.pool_ = nullptr;
  }
  return *this;
}

unsigned Mempool::available() const noexcept { return pool_ ? rte_mempool_avail_count(pool_) : 0; }
unsigned Mempool::in_use() const noexcept { return pool_ ? rte_mempool_in_use_count(pool_) : 0; }

}  // namespace phub::drivers

// Objects and containers in DPDK memory on a chosen NUMA socket (config::place_memory): an lcore's own state
// lives on the lcore's socket, not on the socket of the main lcore that builds it. A socket of -1
// (SOCKET_ID_ANY) takes memory anywhere, the caller's socket first.
#pragma once

#include <rte_common.h>
#include <rte_malloc.h>

#include <algorithm>
#include <cstddef>
#include <new>

namespace phub::engine {

// A standard allocator over rte_malloc_socket; it throws std::bad_alloc where the socket has no room.
template <class T>
struct SocketAllocator {
  using value_type = T;
  int socket = -1;

  explicit SocketAllocator(int on_socket) noexcept : socket(on_socket) {}
  template <class U>
  SocketAllocator(const SocketAllocator<U>& o) noexcept : socket(o.socket) {}  // NOLINT: rebinding

  [[nodiscard]] T* allocate(size_t n) {
    void* p = rte_malloc_socket("phub_lcore", n * sizeof(T), std::max<size_t>(alignof(T), RTE_CACHE_LINE_SIZE),
                                socket);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { rte_free(p); }
  template <class U>
  friend bool operator==(const SocketAllocator& a, const SocketAllocator<U>& b) noexcept {
    return a.socket == b.socket;
  }
};

// A base for a class whose objects live on a chosen socket: `new (socket) T(...)` allocates there (it throws
// std::bad_alloc where the socket has no room), and `delete`, std::unique_ptr<T> included, frees it. A
// plain `new T` does not compile. Alignment up to a cache line.
struct OnSocket {
  static void* operator new(size_t bytes, int socket) {
    void* p = rte_malloc_socket("phub_lcore", bytes, RTE_CACHE_LINE_SIZE, socket);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  static void operator delete(void* p) noexcept { rte_free(p); }
  static void operator delete(void* p, int) noexcept { rte_free(p); }  // a constructor that threw
};

}  // namespace phub::engine

// Network-order loads and stores on unaligned byte buffers (memcpy-based, no UB).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace phub {

template <class T>
[[nodiscard]] constexpr T bswap(T v) noexcept {
  if constexpr (sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  } else {
    return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }
}

// Host order <-> big endian (network order).
template <class T>
[[nodiscard]] constexpr T host_to_be(T v) noexcept {
  if constexpr (std::endian::native == std::endian::big) {
    return v;
  } else {
    return bswap(v);
  }
}

// Host order <-> little endian (payload order).
template <class T>
[[nodiscard]] constexpr T host_to_le(T v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    return v;
  } else {
    return bswap(v);
  }
}

template <class T>
[[nodiscard]] inline T load_be(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return host_to_be(v);
}

template <class T>
inline void store_be(std::byte* p, T v) noexcept {
  v = host_to_be(v);
  std::memcpy(p, &v, sizeof v);
}

template <class T>
[[nodiscard]] inline T load_le(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return host_to_le(v);
}

template <class T>
inline void store_le(std::byte* p, T v) noexcept {
  v = host_to_le(v);
  std::memcpy(p, &v, sizeof v);
}

}  // namespace phub

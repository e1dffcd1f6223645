// Expected<T, E>: a value or an error, for [[nodiscard]] returns at library boundaries (C++20 has no std::expected).
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

namespace phub {

template <class E>
struct Unexpected {
  E error;
};

template <class E>
Unexpected(E) -> Unexpected<E>;

template <class E>
[[nodiscard]] constexpr Unexpected<std::decay_t<E>> unexpected(E&& e) {
  return Unexpected<std::decay_t<E>>{std::forward<E>(e)};
}

template <class T, class E>
class [[nodiscard]] Expected {
 public:
  constexpr Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  template <class G>
  constexpr Expected(Unexpected<G> e) : v_(std::in_place_index<1>, E(std::move(e.error))) {}  // NOLINT

  [[nodiscard]] constexpr bool has_value() const noexcept { return v_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return has_value(); }

  constexpr T& value() & { return std::get<0>(v_); }
  constexpr const T& value() const& { return std::get<0>(v_); }
  constexpr T&& value() && { return std::get<0>(std::move(v_)); }
  constexpr T& operator*() & { return value(); }
  constexpr const T& operator*() const& { return value(); }
  constexpr T* operator->() { return &value(); }
  constexpr const T* operator->() const { return &value(); }

  constexpr const E& error() const& { return std::get<1>(v_); }
  constexpr E&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, E> v_;
};

// Expected<void, E>: success or an error.
template <class E>
class [[nodiscard]] Expected<void, E> {
 public:
  constexpr Expected() = default;
  template <class G>
  constexpr Expected(Unexpected<G> e) : err_(E(std::move(e.error))), ok_(false) {}  // NOLINT

  [[nodiscard]] constexpr bool has_value() const noexcept { return ok_; }
  constexpr explicit operator bool() const noexcept { return ok_; }
  constexpr const E& error() const& { return err_; }

 private:
  E err_{};
  bool ok_ = true;
};

}  // namespace phub

// The texts of an address's octets, split at their separator; shared by the IPv4 and MAC parsers.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"

namespace phub {

// Exactly N fields of `text` separated by `separator` (named `separator_name` in the fault: "it has 3
// dot-separated octets, not 4"); the fields themselves are not checked.
template <size_t N>
[[nodiscard]] Expected<std::array<std::string_view, N>, std::string> split_octets(std::string_view text, char separator,
                                                                                 std::string_view separator_name) {
  if (text.empty()) return unexpected(std::string("it is empty"));
  size_t fields = 1;
  for (const char c : text) fields += c == separator ? 1 : 0;
  if (fields != N) {
    return unexpected("it has " + std::to_string(fields) + " " + std::string(separator_name) + "-separated octet" +
                      (fields == 1 ? "" : "s") + ", not " + std::to_string(N));
  }
  std::array<std::string_view, N> out;
  for (std::string_view& field : out) {
    const size_t end = text.find(separator);
    field = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return out;
}

}  // namespace phub

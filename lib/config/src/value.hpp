// A detached copy of the Lua value a config script returned, so conversion needs no Lua state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace phub::config::detail {

struct Entry;

struct Value {
  enum class Kind : uint8_t { nil, boolean, integer, number, string, table, other };
  Kind kind = Kind::nil;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;            // string contents; the Lua type name for Kind::other
  std::vector<Entry> entries;  // table: integer keys ascending, then string keys in byte order, then others
};

struct Entry {
  Value key;
  Value value;
};

}  // namespace phub::config::detail

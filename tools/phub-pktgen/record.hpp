// A small ordered tree of named values: a run's summary, printed as JSON or handed to Lua as a table.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

struct lua_State;

namespace phub::pktgen {

struct Record;
using Value = std::variant<double, std::string, bool, std::shared_ptr<Record>>;

struct Record {
  std::vector<std::pair<std::string, Value>> fields;
  bool array = false;  // a list: keys are ignored

  Record& set(const std::string& key, Value v);
  Record& push(Value v) { return set("", std::move(v)); }
  [[nodiscard]] const Value* find(const std::string& key) const;
  [[nodiscard]] double number(const std::string& key, double fallback = 0) const;
  // JSON text (phub/base/json.hpp), ending with a newline.
  [[nodiscard]] std::string to_json() const;
};

[[nodiscard]] inline std::shared_ptr<Record> object() { return std::make_shared<Record>(); }
[[nodiscard]] inline std::shared_ptr<Record> list() {
  auto r = std::make_shared<Record>();
  r->array = true;
  return r;
}

// Push `r` onto the Lua stack as a table (lists 1-based).
void push_lua(lua_State* L, const Record& r);

}  // namespace phub::pktgen

// JSON text and Lua tables from a Record.
#include "record.hpp"

#include <lua.hpp>

#include <cmath>

#include "phub/base/json.hpp"

namespace phub::pktgen {
namespace {

Json to_json_value(const Record& r);

Json to_json_value(const Value& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return to_json_value(*std::get<std::shared_ptr<Record>>(v));
}

Json to_json_value(const Record& r) {
  Json out = r.array ? Json::array() : Json::object();
  for (const auto& [k, v] : r.fields) {
    if (r.array) out.push_back(to_json_value(v));
    else out[k] = to_json_value(v);
  }
  return out;
}

void push_value(lua_State* L, const Value& v) {
  if (const auto* d = std::get_if<double>(&v)) {
    if (*d == std::floor(*d) && std::fabs(*d) < 9e15) {
      lua_pushinteger(L, static_cast<lua_Integer>(*d));
    } else {
      lua_pushnumber(L, *d);
    }
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    lua_pushlstring(L, s->data(), s->size());
  } else if (const auto* b = std::get_if<bool>(&v)) {
    lua_pushboolean(L, *b ? 1 : 0);
  } else {
    push_lua(L, *std::get<std::shared_ptr<Record>>(v));
  }
}

}  // namespace

Record& Record::set(const std::string& key, Value v) {
  if (!array) {
    for (auto& f : fields) {
      if (f.first == key) {
        f.second = std::move(v);
        return *this;
      }
    }
  }
  fields.emplace_back(key, std::move(v));
  return *this;
}

const Value* Record::find(const std::string& key) const {
  for (const auto& f : fields) {
    if (f.first == key) return &f.second;
  }
  return nullptr;
}

double Record::number(const std::string& key, double fallback) const {
  const Value* v = find(key);
  const auto* d = v ? std::get_if<double>(v) : nullptr;
  return d ? *d : fallback;
}

std::string Record::to_json() const { return json_text(to_json_value(*this)); }

void push_lua(lua_State* L, const Record& r) {
  lua_createtable(L, r.array ? static_cast<int>(r.fields.size()) : 0, r.array ? 0 : static_cast<int>(r.fields.size()));
  lua_Integer i = 1;
  for (const auto& [k, v] : r.fields) {
    push_value(L, v);
    if (r.array) {
      lua_rawseti(L, -2, i++);
    } else {
      lua_setfield(L, -2, k.c_str());
    }
  }
}

}  // namespace phub::pktgen

// JSON text and Lua tables from a Record.
#include "record.hpp"

#include <lua.hpp>

#include <cmath>
#include <cstdio>

namespace phub::pktgen {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20) {
          out += c;
        } else {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        }
    }
  }
  return out + "\"";
}

std::string number_text(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[32];
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", d);
  }
  return buf;
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

std::string Record::to_json(int indent) const {
  const std::string pad(static_cast<size_t>(indent + 2), ' '), end_pad(static_cast<size_t>(indent), ' ');
  std::string out = array ? "[" : "{";
  bool first = true;
  for (const auto& [k, v] : fields) {
    out += first ? "\n" : ",\n";
    first = false;
    out += pad;
    if (!array) out += quote(k) + ": ";
    if (const auto* d = std::get_if<double>(&v)) {
      out += number_text(*d);
    } else if (const auto* s = std::get_if<std::string>(&v)) {
      out += quote(*s);
    } else if (const auto* b = std::get_if<bool>(&v)) {
      out += *b ? "true" : "false";
    } else {
      out += std::get<std::shared_ptr<Record>>(v)->to_json(indent + 2);
    }
  }
  if (!first) out += "\n" + end_pad;
  return out + (array ? "]" : "}");
}

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

// Copies the table a config script returned out of the Lua state into a Value tree, within limits.
#include <lua.hpp>

#include <algorithm>

#include "sandbox.hpp"

namespace phub::config::detail {
namespace {

// Deeper tables become Kind::other: the schema is never nested deeper than 5, so they are errors anyway.
constexpr int kMaxDepth = 16;

int key_rank(const Value& k) {
  switch (k.kind) {
    case Value::Kind::integer: return 0;
    case Value::Kind::string: return 1;
    default: return 2;
  }
}

bool key_less(const Entry& a, const Entry& b) {
  int ra = key_rank(a.key);
  int rb = key_rank(b.key);
  if (ra != rb) return ra < rb;
  if (ra == 0) return a.key.integer < b.key.integer;
  return a.key.text < b.key.text;
}

class Copier {
 public:
  Copier(lua_State* L, const LoadLimits& limits) : L_(L), limits_(limits) {}

  // False when the copy would exceed the limits.
  bool copy(int index, int depth, Value& out) {
    if (++values_ > limits_.max_values) return false;
    int type = lua_type(L_, index);
    switch (type) {
      case LUA_TNIL: out.kind = Value::Kind::nil; return true;
      case LUA_TBOOLEAN:
        out.kind = Value::Kind::boolean;
        out.boolean = lua_toboolean(L_, index) != 0;
        return true;
      case LUA_TNUMBER:
        if (lua_isinteger(L_, index) != 0) {
          out.kind = Value::Kind::integer;
          out.integer = lua_tointegerx(L_, index, nullptr);
        } else {
          out.kind = Value::Kind::number;
          out.number = lua_tonumberx(L_, index, nullptr);
        }
        return true;
      case LUA_TSTRING: {
        size_t n = 0;
        const char* s = lua_tolstring(L_, index, &n);  // already a string: no conversion, no allocation
        bytes_ += n;
        if (bytes_ > limits_.max_memory_bytes) return false;
        out.kind = Value::Kind::string;
        out.text.assign(s, n);
        return true;
      }
      case LUA_TTABLE:
        if (depth < kMaxDepth && lua_checkstack(L_, 3) != 0) return copy_table(lua_absindex(L_, index), depth, out);
        out.kind = Value::Kind::other;
        out.text = "table nested too deep";
        return true;
      default:
        out.kind = Value::Kind::other;
        out.text = lua_typename(L_, type);
        return true;
    }
  }

 private:
  bool copy_table(int index, int depth, Value& out) {
    out.kind = Value::Kind::table;
    lua_pushnil(L_);
    while (lua_next(L_, index) != 0) {
      Entry e;
      // Keys are copied shallowly: a table key only needs to be reported, not read.
      bool ok = lua_type(L_, -2) == LUA_TTABLE ? copy_other_key(e.key) : copy(-2, kMaxDepth, e.key);
      ok = ok && copy(lua_gettop(L_), depth + 1, e.value);
      lua_pop(L_, 1);
      if (!ok) {
        lua_pop(L_, 1);
        return false;
      }
      out.entries.push_back(std::move(e));
    }
    std::sort(out.entries.begin(), out.entries.end(), key_less);
    return true;
  }

  bool copy_other_key(Value& key) {
    key.kind = Value::Kind::other;
    key.text = "table";
    return ++values_ <= limits_.max_values;
  }

  lua_State* L_;
  const LoadLimits& limits_;
  size_t values_ = 0;
  size_t bytes_ = 0;
};

}  // namespace

Expected<Value, std::string> copy_out(lua_State* L, int index, const LoadLimits& limits) {
  Copier copier(L, limits);
  Value root;
  if (!copier.copy(index, 0, root)) {
    return unexpected("the returned table holds more than " + std::to_string(limits.max_values) + " values or " +
                      std::to_string(limits.max_memory_bytes) + " bytes of strings");
  }
  return root;
}

}  // namespace phub::config::detail

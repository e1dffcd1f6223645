// Typed reading of a copied config table: paths, value rendering, scalar rules, records and lists.
#include "reader.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include "phub/config/text.hpp"

namespace phub::config::detail {
namespace {

constexpr size_t kMaxErrorsShown = 20;

bool is_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string render_number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.14g", x);
  std::string s = buf;
  if (std::isfinite(x) && s.find_first_of(".en") == std::string::npos) s += ".0";  // Lua shows 4.0 for a float
  return s;
}

// A description of a value's kind and, for scalars, the value: "number (3)".
std::string kind_and_value(const Value& v) {
  std::string s(type_name(v));
  if (v.kind != Value::Kind::table && v.kind != Value::Kind::nil && v.kind != Value::Kind::other) {
    s += " (" + render(v) + ")";
  }
  return s;
}

}  // namespace

void Errors::add(std::string_view path, std::string_view message) {
  ++count_;
  if (list_.size() < kMaxErrorsShown) list_.push_back(std::string(path) + ": " + std::string(message));
}

std::string Errors::join(std::string_view prefix) const {
  std::string out;
  for (size_t i = 0; i < list_.size(); ++i) {
    if (i != 0) out += '\n';
    out.append(prefix).append(list_[i]);
  }
  if (count_ > list_.size()) {
    out.append("\n").append(prefix).append("... and ");
    out.append(std::to_string(count_ - list_.size())).append(" more errors");
  }
  return out;
}

std::string field_path(std::string_view parent, std::string_view key) {
  if (key.size() > kMaxQuotedBytes || !is_identifier(key)) return std::string(parent) + "[" + quote(key) + "]";
  return parent.empty() ? std::string(key) : std::string(parent) + "." + std::string(key);
}

std::string index_path(std::string_view parent, size_t index_from_1) {
  return std::string(parent) + "[" + std::to_string(index_from_1) + "]";
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxQuotedBytes; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out.append("\\").append(std::to_string(c));
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (s.size() > kMaxQuotedBytes) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string excerpt(std::string_view s, size_t keep) {
  if (s.size() <= keep) return std::string(s);
  return std::string(s.substr(0, keep)) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string render(const Value& v) {
  switch (v.kind) {
    case Value::Kind::nil: return "nil";
    case Value::Kind::boolean: return v.boolean ? "true" : "false";
    case Value::Kind::integer: return std::to_string(v.integer);
    case Value::Kind::number: return render_number(v.number);
    case Value::Kind::string: return quote(v.text);
    case Value::Kind::table: return "a table";
    case Value::Kind::other: return "a " + v.text;
  }
  return "?";
}

std::string_view type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::nil: return "nil";
    case Value::Kind::boolean: return "boolean";
    case Value::Kind::integer:
    case Value::Kind::number: return "number";
    case Value::Kind::string: return "string";
    case Value::Kind::table: return "table";
    case Value::Kind::other: return v.text;
  }
  return "?";
}

bool expect_kind(const Value& v, Value::Kind kind, std::string_view expected, std::string_view path,
                 Errors& errors) {
  if (v.kind == kind) return true;
  errors.add(path, "expected " + std::string(expected) + ", got " + kind_and_value(v));
  return false;
}

std::optional<int64_t> as_integer(const Value& v, std::string_view path, int64_t lo, int64_t hi, Errors& errors) {
  std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (v.kind == Value::Kind::number) {
    // 2^20 is a float in Lua 5.4: accept floats with an integral value.
    double x = v.number;
    if (!std::isfinite(x) || std::trunc(x) != x) {
      errors.add(path, render(v) + " is not an integer");
      return std::nullopt;
    }
    if (x < static_cast<double>(lo) || x > static_cast<double>(hi) || x >= 0x1p63) {
      errors.add(path, render(v) + " is not in " + range);
      return std::nullopt;
    }
    return static_cast<int64_t>(x);
  }
  if (!expect_kind(v, Value::Kind::integer, "integer", path, errors)) return std::nullopt;
  if (v.integer < lo || v.integer > hi) {
    errors.add(path, render(v) + " is not in " + range);
    return std::nullopt;
  }
  return v.integer;
}

std::optional<uint64_t> as_size(const Value& v, std::string_view path, uint64_t lo, uint64_t hi, Errors& errors) {
  std::optional<uint64_t> bytes;
  if (v.kind == Value::Kind::string) {
    bytes = parse_size(v.text);
    if (!bytes) {
      errors.add(path, render(v) + " is not a size (an integer, or a string like \"64MiB\" or \"32KiB\")");
      return std::nullopt;
    }
  } else if (v.kind == Value::Kind::integer || v.kind == Value::Kind::number) {
    Errors local;
    auto x = as_integer(v, path, 0, INT64_MAX, local);
    if (!x) {
      errors.add(path, render(v) + " is not a size (a non-negative integer number of bytes)");
      return std::nullopt;
    }
    bytes = static_cast<uint64_t>(*x);
  } else {
    errors.add(path, "expected integer or size string, got " + kind_and_value(v));
    return std::nullopt;
  }
  if (*bytes < lo || *bytes > hi) {
    errors.add(path, render(v) + " is not in " + format_size(lo) + ".." + format_size(hi));
    return std::nullopt;
  }
  return bytes;
}

std::optional<double> as_number(const Value& v, std::string_view path, const std::function<bool(double)>& ok,
                                std::string_view rule, Errors& errors) {
  double x = 0;
  if (v.kind == Value::Kind::integer) {
    x = static_cast<double>(v.integer);
  } else if (expect_kind(v, Value::Kind::number, "number", path, errors)) {
    x = v.number;
  } else {
    return std::nullopt;
  }
  if (!std::isfinite(x) || !ok(x)) {
    errors.add(path, render(v) + " " + std::string(rule));
    return std::nullopt;
  }
  return x;
}

std::optional<std::string> as_string(const Value& v, std::string_view path, Errors& errors) {
  if (!expect_kind(v, Value::Kind::string, "string", path, errors)) return std::nullopt;
  return v.text;
}

std::vector<const Value*> as_list(const Value& v, std::string_view path, Errors& errors) {
  std::vector<const Value*> items;
  if (!expect_kind(v, Value::Kind::table, "a list (table)", path, errors)) return items;
  int64_t next = 1;
  for (const Entry& e : v.entries) {
    if (e.key.kind != Value::Kind::integer) {
      std::string where = e.key.kind == Value::Kind::string ? field_path(path, e.key.text)
                                                            : std::string(path) + "[" + render(e.key) + "]";
      errors.add(where, "unknown key (" + std::string(path.empty() ? "the config" : path) + " is a list)");
      continue;
    }
    if (e.key.integer != next) {
      errors.add(index_path(path, static_cast<size_t>(std::max<int64_t>(next, 1))),
                 "missing: a list has no holes (next index is " + std::to_string(e.key.integer) + ")");
      return {};
    }
    items.push_back(&e.value);
    ++next;
  }
  return items;
}

Record::Record(const Value& table, std::string path, Errors& errors)
    : table_(table), path_(std::move(path)), errors_(errors) {}

Record::~Record() {
  for (const Entry& e : table_.entries) {
    if (e.key.kind == Value::Kind::string) {
      if (std::find(known_.begin(), known_.end(), e.key.text) == known_.end()) {
        errors_.add(path(e.key.text), "unknown key");
      }
    } else {
      errors_.add(path_ + "[" + render(e.key) + "]",
                  "unexpected " + std::string(type_name(e.key)) + " key (" +
                      (path_.empty() ? std::string("the config") : path_) + " takes named fields)");
    }
  }
}

const Value* Record::get(std::string_view key, bool required) {
  known_.push_back(key);
  for (const Entry& e : table_.entries) {
    if (e.key.kind == Value::Kind::string && e.key.text == key) return &e.value;
  }
  if (required) errors_.add(path(key), "missing (required)");
  return nullptr;
}

bool Record::has(std::string_view key) const {
  return std::any_of(table_.entries.begin(), table_.entries.end(),
                     [&](const Entry& e) { return e.key.kind == Value::Kind::string && e.key.text == key; });
}

void Record::number(std::string_view key, float& out, const std::function<bool(double)>& ok, std::string_view rule) {
  const Value* v = get(key);
  if (v == nullptr) return;
  auto x = as_number(*v, path(key), ok, rule, errors_);
  if (!x) return;
  // The rule must hold for the float that is stored, not only for the double that was written.
  auto f = std::fabs(*x) <= FLT_MAX ? std::optional<float>(static_cast<float>(*x)) : std::nullopt;
  if (!f || !std::isfinite(*f)) {
    errors_.add(path(key), render(*v) + " is out of the range of a 32-bit float");
  } else if (!ok(*f)) {
    errors_.add(path(key), render(*v) + " " + std::string(rule) + " once rounded to a 32-bit float");
  } else {
    out = *f;
  }
}

void Record::boolean(std::string_view key, bool& out) {
  if (const Value* v = get(key)) {
    if (expect_kind(*v, Value::Kind::boolean, "boolean", path(key), errors_)) out = v->boolean;
  }
}

void Record::string(std::string_view key, std::string& out, bool required) {
  if (const Value* v = get(key, required)) {
    if (auto s = as_string(*v, path(key), errors_)) out = std::move(*s);
  }
}

}  // namespace phub::config::detail

// Typed reading of a copied config table: Lua-ish field paths, type and range rules, collected errors.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "value.hpp"

namespace phub::config::detail {

// Errors as "path: message", in the order they were found. Only the first ones shown are kept; the rest
// are counted, so a table of a million bad keys costs a counter, not a million strings.
class Errors {
 public:
  void add(std::string_view path, std::string_view message);
  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] size_t size() const { return count_; }
  // All errors, one per line, each prefixed with `prefix`; long lists are cut with a count of the rest.
  [[nodiscard]] std::string join(std::string_view prefix) const;

 private:
  std::vector<std::string> list_;
  size_t count_ = 0;
};

// Paths: "jobs", "jobs[2]", "jobs[2].workers", "jobs[1].ranks_by_rack[\"rack-a\"]".
[[nodiscard]] std::string field_path(std::string_view parent, std::string_view key);
[[nodiscard]] std::string index_path(std::string_view parent, size_t index_from_1);

// Messages quote at most this many bytes of a key, string value or name: a longer one is cut and its
// length given, as "\"abc...\"... (10485760 bytes)".
inline constexpr size_t kMaxQuotedBytes = 64;

// A value as a message shows it: 0, 2.5, "text", true, nil, a table.
[[nodiscard]] std::string render(const Value& v);
[[nodiscard]] std::string quote(std::string_view s);  // a Lua string literal, cut after kMaxQuotedBytes
// The first `keep` bytes of s as they are, then "... (N bytes)" when s is longer.
[[nodiscard]] std::string excerpt(std::string_view s, size_t keep);
[[nodiscard]] std::string_view type_name(const Value& v);

// Scalar checks on one value; each reports "<path>: <bad value> <rule>" and returns nullopt on error.
[[nodiscard]] std::optional<int64_t> as_integer(const Value& v, std::string_view path, int64_t lo, int64_t hi,
                                                Errors& errors);
// An integer, or a string with a unit (parse_size), in lo..hi.
[[nodiscard]] std::optional<uint64_t> as_size(const Value& v, std::string_view path, uint64_t lo, uint64_t hi,
                                              Errors& errors);
// A finite number for which ok(x) holds; `rule` words the failure ("is not > 0").
[[nodiscard]] std::optional<double> as_number(const Value& v, std::string_view path,
                                              const std::function<bool(double)>& ok, std::string_view rule,
                                              Errors& errors);
[[nodiscard]] std::optional<std::string> as_string(const Value& v, std::string_view path, Errors& errors);
[[nodiscard]] bool expect_kind(const Value& v, Value::Kind kind, std::string_view expected, std::string_view path,
                               Errors& errors);
// A sequence 1..n with no other keys: the elements in order (holes and extra keys are errors).
[[nodiscard]] std::vector<const Value*> as_list(const Value& v, std::string_view path, Errors& errors);

// One of a fixed set of words.
template <class E>
using Choices = std::span<const std::pair<std::string_view, E>>;

template <class E>
std::optional<E> as_choice(const Value& v, std::string_view path, Choices<E> choices, Errors& errors) {
  auto s = as_string(v, path, errors);
  if (!s) return std::nullopt;
  std::string words;
  for (const auto& [word, e] : choices) {
    if (word == *s) return e;
    words += (words.empty() ? "" : ", ") + quote(word);
  }
  errors.add(path, render(v) + " is not one of " + words);
  return std::nullopt;
}

// A table read as a record: fields are looked up by name; every key never looked up is reported as
// unknown when the Record goes out of scope.
class Record {
 public:
  Record(const Value& table, std::string path, Errors& errors);
  ~Record();
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

  // The field's value, or nullptr when absent (then an error if required).
  const Value* get(std::string_view key, bool required = false);
  [[nodiscard]] bool has(std::string_view key) const;
  [[nodiscard]] std::string path(std::string_view key) const { return field_path(path_, key); }
  [[nodiscard]] const std::string& path() const { return path_; }
  Errors& errors() { return errors_; }

  // Field readers: leave `out` unchanged when the field is absent or bad.
  template <class T>
  void integer(std::string_view key, T& out, int64_t lo, int64_t hi, bool required = false) {
    if (const Value* v = get(key, required)) {
      if (auto x = as_integer(*v, path(key), lo, hi, errors_)) out = static_cast<T>(*x);
    }
  }
  template <class T>
  void size(std::string_view key, T& out, uint64_t lo, uint64_t hi) {
    if (const Value* v = get(key)) {
      if (auto x = as_size(*v, path(key), lo, hi, errors_)) out = static_cast<T>(*x);
    }
  }
  void number(std::string_view key, float& out, const std::function<bool(double)>& ok, std::string_view rule);
  void boolean(std::string_view key, bool& out);
  void string(std::string_view key, std::string& out, bool required = false);
  template <class E>
  void choice(std::string_view key, E& out, Choices<E> choices) {
    if (const Value* v = get(key)) {
      if (auto x = as_choice(*v, path(key), choices, errors_)) out = *x;
    }
  }

 private:
  const Value& table_;
  std::string path_;
  Errors& errors_;
  std::vector<std::string_view> known_;
};

}  // namespace phub::config::detail

// A streaming JSON writer (RFC 8259) for reports and summaries: objects, arrays, strings, numbers, booleans, null,
// indented two spaces a level.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace phub {

// Members of an object take their key; elements of an array ignore it (so `item` is `value` with no key).
// Strings: '"', '\\' and the control characters U+0000..U+001F are escaped (\b \f \n \r \t, else \u00XX);
// valid UTF-8 passes through unchanged; a byte that does not start a valid UTF-8 sequence becomes \ufffd.
// Numbers: a double with no fraction and a magnitude below 1e15 is written as an integer ("12"), any other
// finite double with six significant digits ("%.6g"), NaN and infinities as null; integer types exactly.
// The text of a finished document ends with a newline.
class JsonWriter {
 public:
  JsonWriter& begin_object(std::string_view key = {});
  JsonWriter& end_object();
  // one_line: the elements on one line, separated by ", " (short lists, matrix rows).
  JsonWriter& begin_array(std::string_view key = {}, bool one_line = false);
  JsonWriter& end_array();

  JsonWriter& value(std::string_view key, std::string_view s);
  JsonWriter& value(std::string_view key, const char* s) { return value(key, std::string_view(s)); }
  JsonWriter& value(std::string_view key, double v);
  JsonWriter& value(std::string_view key, bool v);
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  JsonWriter& value(std::string_view key, T v) {
    member(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter& null(std::string_view key = {});

  // Array elements.
  JsonWriter& item(std::string_view s) { return value({}, s); }
  JsonWriter& item(const char* s) { return value({}, std::string_view(s)); }
  JsonWriter& item(double v) { return value({}, v); }
  JsonWriter& item(bool v) { return value({}, v); }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  JsonWriter& item(T v) {
    return value({}, v);
  }

  [[nodiscard]] const std::string& str() const { return out_; }

 private:
  // Separator, line break and indentation before the next member or element, then the key inside an object.
  void member(std::string_view key);
  void open(std::string_view key, char bracket, bool one_line);
  void close(char bracket);

  std::string out_;
  struct Level {
    bool object = false;
    bool one_line = false;
    bool empty = true;
  };
  std::vector<Level> open_;
};

}  // namespace phub

// A minimal streaming JSON writer (objects, arrays, strings, numbers; non-finite numbers become null).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace phub::probe {

class JsonWriter {
 public:
  JsonWriter& begin_object(std::string_view key = {});
  JsonWriter& end_object();
  JsonWriter& begin_array(std::string_view key = {}, bool compact = false);  // compact: one line
  JsonWriter& end_array();
  JsonWriter& value(std::string_view key, std::string_view s);
  JsonWriter& value(std::string_view key, const char* s) { return value(key, std::string_view(s)); }
  JsonWriter& value(std::string_view key, double v);
  JsonWriter& value(std::string_view key, bool v);
  JsonWriter& null(std::string_view key = {});
  // Array elements (no key).
  JsonWriter& item(std::string_view s) { return value({}, s); }
  JsonWriter& item(double v) { return value({}, v); }

  [[nodiscard]] const std::string& str() const { return out_; }

 private:
  void key(std::string_view k);
  void open(std::string_view k, char bracket, bool compact);
  void close(char bracket);
  void quote(std::string_view s);

  std::string out_;
  struct Level {
    bool first = true;  // no element yet
    bool compact = false;
  };
  std::vector<Level> open_;
};

}  // namespace phub::probe

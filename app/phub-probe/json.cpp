// JSON writer implementation.
#include "json.hpp"

#include <cmath>
#include <cstdio>

namespace phub::probe {

void JsonWriter::quote(std::string_view s) {
  out_ += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out_ += '\\', out_ += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out_ += buf;
    } else {
      out_ += c;
    }
  }
  out_ += '"';
}

void JsonWriter::key(std::string_view k) {
  if (!open_.empty()) {
    if (!open_.back().first) out_ += open_.back().compact ? ", " : ",";
    open_.back().first = false;
    if (!open_.back().compact) out_ += '\n', out_.append(2 * open_.size(), ' ');
  }
  if (!k.empty()) {
    quote(k);
    out_ += ": ";
  }
}

void JsonWriter::open(std::string_view k, char bracket, bool compact) {
  key(k);
  out_ += bracket;
  open_.push_back({true, compact});
}

void JsonWriter::close(char bracket) {
  const Level l = open_.back();
  open_.pop_back();
  if (!l.first && !l.compact) out_ += '\n', out_.append(2 * open_.size(), ' ');
  out_ += bracket;
  if (open_.empty()) out_ += '\n';
}

JsonWriter& JsonWriter::begin_object(std::string_view k) {
  open(k, '{', false);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  close('}');
  return *this;
}

JsonWriter& JsonWriter::begin_array(std::string_view k, bool compact) {
  open(k, '[', compact);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close(']');
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, std::string_view s) {
  key(k);
  quote(s);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, double v) {
  key(k);
  if (!std::isfinite(v)) {
    out_ += "null";
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out_ += buf;
  }
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, bool v) {
  key(k);
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null(std::string_view k) {
  key(k);
  out_ += "null";
  return *this;
}

}  // namespace phub::probe

// The JSON writer: layout, string escaping and number forms.
#include "phub/base/json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace phub {
namespace {

// The length of the valid UTF-8 sequence that starts s[i] (2..4), or 0 if there is none (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_bytes(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_bytes(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string number_text(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

}  // namespace

void JsonWriter::member(std::string_view key) {
  if (open_.empty()) return;
  Level& l = open_.back();
  if (!l.empty) out_ += l.one_line ? ", " : ",";
  l.empty = false;
  if (!l.one_line) {
    out_ += '\n';
    out_.append(2 * open_.size(), ' ');
  }
  if (l.object) {
    append_quoted(out_, key);
    out_ += ": ";
  }
}

void JsonWriter::open(std::string_view key, char bracket, bool one_line) {
  member(key);
  out_ += bracket;
  open_.push_back(Level{bracket == '{', one_line, true});
}

void JsonWriter::close(char bracket) {
  const Level l = open_.back();
  open_.pop_back();
  if (!l.empty && !l.one_line) {
    out_ += '\n';
    out_.append(2 * open_.size(), ' ');
  }
  out_ += bracket;
  if (open_.empty()) out_ += '\n';
}

JsonWriter& JsonWriter::begin_object(std::string_view key) {
  open(key, '{', false);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  close('}');
  return *this;
}

JsonWriter& JsonWriter::begin_array(std::string_view key, bool one_line) {
  open(key, '[', one_line);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close(']');
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, std::string_view s) {
  member(key);
  append_quoted(out_, s);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, double v) {
  member(key);
  out_ += number_text(v);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view key, bool v) {
  member(key);
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null(std::string_view key) {
  member(key);
  out_ += "null";
  return *this;
}

}  // namespace phub

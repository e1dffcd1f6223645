// The control socket's wire format: splitting and quoting request words, framing answers.
#include "phub/ctl/protocol.hpp"

#include <cstdio>

namespace phub::ctl {
namespace {

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }
bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string at_byte(size_t index) { return " at byte " + std::to_string(index + 1); }

}  // namespace

bool has_control_bytes(std::string_view text) {
  for (const char c : text) {
    if (is_control(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

std::string excerpt(std::string_view text, size_t max_bytes) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  out += text.size() > max_bytes ? "'..." : "'";
  return out;
}

Expected<std::vector<std::string>, std::string> split_words(std::string_view line) {
  for (size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (is_control(c)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return unexpected("control byte " + std::string(hex) + at_byte(i) + " (a request is one line of text)");
    }
  }
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (is_blank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c != '"' && c != '\'') {
      word += c;
      continue;
    }
    const size_t opened = i;
    for (++i;; ++i) {
      if (i == line.size()) return unexpected(std::string("unterminated ") + c + " quote opened" + at_byte(opened));
      if (line[i] == c) break;
      const bool escape = c == '"' && line[i] == '\\' && i + 1 < line.size() &&
                          (line[i + 1] == '"' || line[i + 1] == '\\');
      if (escape) ++i;
      word += line[i];
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string quote_word(std::string_view word) {
  if (!word.empty() && word.find_first_of(" \t\"'\\") == std::string_view::npos) return std::string(word);
  std::string out = "\"";
  for (const char c : word) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string format_request(std::span<const std::string> words) {
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + quote_word(w);
  return line + "\n";
}

std::string format_answer(const Reply& reply) {
  return (reply.ok ? "ok " : "error ") + std::to_string(reply.body.size()) + "\n" + reply.body;
}

Expected<StatusLine, std::string> parse_status_line(std::string_view line) {
  const auto bad = [&](const std::string& why) {
    return unexpected("not an answer's status line (" + why + "): " + excerpt(line));
  };
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return bad("expected 'ok <bytes>' or 'error <bytes>'");
  const std::string_view word = line.substr(0, space);
  const std::string_view digits = line.substr(space + 1);
  if (word != "ok" && word != "error") return bad("expected 'ok' or 'error' first");
  if (digits.empty() || digits.size() > 20 || digits.find_first_not_of("0123456789") != std::string_view::npos ||
      (digits.size() > 1 && digits[0] == '0')) {
    return bad("the length is not a decimal number");
  }
  uint64_t bytes = 0;
  for (const char d : digits) {
    if (bytes > kMaxBodyBytes) break;
    bytes = bytes * 10 + static_cast<uint64_t>(d - '0');
  }
  if (bytes > kMaxBodyBytes) return bad("the length is above the limit of " + std::to_string(kMaxBodyBytes));
  return StatusLine{word == "ok", bytes};
}

}  // namespace phub::ctl

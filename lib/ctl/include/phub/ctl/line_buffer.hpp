// Bounded assembly of request lines from a byte stream: a client's bytes wait here until a newline.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "phub/ctl/protocol.hpp"

namespace phub::ctl {

// Holds at most capacity_bytes. Read into free_space(), commit() what was read, then take_line()
// until it returns nothing. When the buffer is full and holds no newline, the line is too long: the
// caller refuses it and reads no more.
class LineBuffer {
 public:
  explicit LineBuffer(size_t capacity_bytes = kMaxRequestBytes) : bytes_(capacity_bytes) {}

  // The room left to read into; empty when the buffer is full.
  [[nodiscard]] std::span<char> free_space() { return std::span<char>(bytes_).subspan(held_); }
  void commit(size_t bytes) { held_ += bytes; }

  // The next complete line, without its newline and without one carriage return before it.
  [[nodiscard]] std::optional<std::string> take_line();
  [[nodiscard]] bool has_line();
  // Full, and no newline in it.
  [[nodiscard]] bool too_long() { return held_ == bytes_.size() && !has_line(); }
  [[nodiscard]] size_t held_bytes() const { return held_; }

 private:
  std::vector<char> bytes_;
  size_t held_ = 0;
  size_t scanned_ = 0;  // the first scanned_ bytes hold no newline
};

}  // namespace phub::ctl

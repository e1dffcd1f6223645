// Bounded assembly of request lines from a byte stream.
#include "phub/ctl/line_buffer.hpp"

#include <algorithm>
#include <cstring>

namespace phub::ctl {

bool LineBuffer::has_line() {
  const auto begin = bytes_.begin() + static_cast<std::ptrdiff_t>(scanned_);
  const auto end = bytes_.begin() + static_cast<std::ptrdiff_t>(held_);
  const auto newline = std::find(begin, end, '\n');
  scanned_ = static_cast<size_t>(newline - bytes_.begin());
  return newline != end;
}

std::optional<std::string> LineBuffer::take_line() {
  if (!has_line()) return std::nullopt;
  size_t length = scanned_;
  if (length > 0 && bytes_[length - 1] == '\r') --length;
  std::string line(bytes_.data(), length);
  const size_t consumed = scanned_ + 1;
  std::memmove(bytes_.data(), bytes_.data() + consumed, held_ - consumed);
  held_ -= consumed;
  scanned_ = 0;
  return line;
}

}  // namespace phub::ctl

// The control socket's wire format: a request is one line of words, an answer is a status line
// `ok <bytes>` or `error <bytes>` followed by exactly that many bytes of body (docs/ctl.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/ctl/handler.hpp"

namespace phub::ctl {

// A request line, newline included, is at most this long; a longer one is refused unread.
inline constexpr size_t kMaxRequestBytes = 4096;
// The body of an answer is at most this long (the server answers an error in place of a longer one).
inline constexpr uint64_t kMaxBodyBytes = uint64_t{64} << 20;
// `error 67108864\n` is 15 bytes; a status line longer than this is not one.
inline constexpr size_t kMaxStatusLineBytes = 32;

// Splits a request line (without its newline) into words. Words are separated by spaces or tabs;
// within a word, "double quotes" keep spaces and take \" and \\ as escapes, 'single quotes' keep
// everything literally. Control bytes (below 0x20 other than tab, and 0x7f) are refused: requests are
// text. The error says what is wrong and at which byte (counted from 1).
[[nodiscard]] Expected<std::vector<std::string>, std::string> split_words(std::string_view line);

// Quotes a word so that split_words gives it back unchanged (words without spaces, quotes or
// backslashes are returned as they are). A word with control bytes cannot be sent: check first.
[[nodiscard]] std::string quote_word(std::string_view word);
[[nodiscard]] bool has_control_bytes(std::string_view text);

// The request line for these words, newline included.
[[nodiscard]] std::string format_request(std::span<const std::string> words);

// The bytes of an answer: status line and body.
[[nodiscard]] std::string format_answer(const Reply& reply);

// A parsed status line: success or failure, and the body's length.
struct StatusLine {
  bool ok = true;
  uint64_t body_bytes = 0;
};

// Parses a status line without its newline: `ok <n>` or `error <n>`, n decimal without leading zeros
// and at most kMaxBodyBytes.
[[nodiscard]] Expected<StatusLine, std::string> parse_status_line(std::string_view line);

// Untrusted text for an error message: in single quotes, bytes outside printable ASCII as \xNN, cut
// to max_bytes with "..." after it.
[[nodiscard]] std::string excerpt(std::string_view text, size_t max_bytes = 64);

}  // namespace phub::ctl

// libFuzzer target for the control protocol: the server's line assembly fed in arbitrary pieces, each
// line split, parsed and dispatched to a handler, and the client's status-line parser. Input: byte 0
// picks the sizes of the reads, the rest is what a client sends.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fake_handler.hpp"
#include "phub/ctl/command.hpp"
#include "phub/ctl/line_buffer.hpp"
#include "phub/ctl/protocol.hpp"

using namespace phub::ctl;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// What any answer must be: framed so that the client reads back the same thing, an error with a reason.
void check_answer(const Reply& reply) {
  const std::string framed = format_answer(reply);
  const size_t newline = framed.find('\n');
  auto status = parse_status_line(std::string_view(framed).substr(0, newline));
  check(status.has_value() && status->ok == reply.ok && status->body_bytes == framed.size() - newline - 1);
  if (!reply.ok) check(!reply.body.empty() && reply.body.back() == '\n');
}

// Words that split come back unchanged through quoting.
void check_quoting(std::string_view line) {
  auto words = split_words(line);
  if (!words) return;
  const std::string request = format_request(*words);
  check(request.back() == '\n');
  auto again = split_words(std::string_view(request).substr(0, request.size() - 1));
  check(again.has_value() && *again == *words);
}

// A status line that parses is in its one canonical form.
void check_status_line(std::string_view line) {
  auto status = parse_status_line(line);
  if (!status) return;
  check(line == (status->ok ? "ok " : "error ") + std::to_string(status->body_bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t read_bytes = 1 + data[0] % 64 * 67;  // 1 .. 4222 bytes a read, across the line limit
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  check_status_line(stream.substr(0, stream.find('\n')));

  test::FakeHandler handler;
  LineBuffer input;
  for (size_t at = 0; at < stream.size();) {
    auto room = input.free_space();
    check(!room.empty());
    const size_t n = std::min({read_bytes, room.size(), stream.size() - at});
    std::memcpy(room.data(), stream.data() + at, n);
    input.commit(n);
    at += n;
    while (auto line = input.take_line()) {
      check(line->size() < kMaxRequestBytes);
      check_quoting(*line);
      check_answer(answer_request(*line, handler));
    }
    if (input.too_long()) break;  // the server answers with an error and closes
  }
  return 0;
}

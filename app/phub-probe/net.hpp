// Sockets for the probe, owned by phub::UniqueFd: TCP connect/listen with timeouts, and a line-oriented
// connection.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/base/unique_fd.hpp"

namespace phub::probe {

[[nodiscard]] Expected<sockaddr_in, std::string> make_sockaddr(const std::string& addr, uint16_t port);
[[nodiscard]] Expected<UniqueFd, std::string> tcp_listen(const std::string& addr, uint16_t port);
[[nodiscard]] Expected<UniqueFd, std::string> tcp_connect(const std::string& addr, uint16_t port, int timeout_ms);

// Newline-terminated text commands over a stream socket, with bounded reads.
class LineConn {
 public:
  explicit LineConn(UniqueFd fd) : fd_(std::move(fd)) {}
  [[nodiscard]] int fd() const { return fd_.get(); }
  // Reads one line (without the newline), waiting at most timeout_ms; errors on close, timeout or >64 KiB.
  [[nodiscard]] Expected<std::string, std::string> read_line(int timeout_ms);
  // Reads exactly `bytes` raw bytes (after any line already read) and discards them.
  [[nodiscard]] Expected<void, std::string> drain(uint64_t bytes, int timeout_ms);
  [[nodiscard]] Expected<void, std::string> write_all(std::string_view data);
  // True if a full line is already buffered (no read needed).
  [[nodiscard]] bool has_line() const { return buf_.find('\n') != std::string::npos; }

 private:
  UniqueFd fd_;
  std::string buf_;
};

[[nodiscard]] uint64_t monotonic_ns();

}  // namespace phub::probe

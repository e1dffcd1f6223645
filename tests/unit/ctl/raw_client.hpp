// A raw connection to the control socket, for what phub-ctl never does: garbage, half lines, not reading.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "phub/ctl/handler.hpp"
#include "phub/ctl/protocol.hpp"
#include "unix_socket.hpp"

namespace phub::ctl::test {

class RawClient {
 public:
  explicit RawClient(const std::string& path) : fd_(unix_socket(path, Then::connect)) {}
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  [[nodiscard]] bool connected() const { return fd_ >= 0; }
  [[nodiscard]] int fd() const { return fd_; }

  // Sends everything (blocking); false when the connection failed.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void shutdown_write() { (void)::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The next framed answer; nothing on end of file, a malformed answer or after `timeout`.
  std::optional<Reply> read_answer(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    size_t newline;
    while ((newline = held_.find('\n')) == std::string::npos) {
      if (held_.size() > kMaxStatusLineBytes || !receive(end)) return std::nullopt;
    }
    auto status = parse_status_line(std::string_view(held_).substr(0, newline));
    if (!status) return std::nullopt;
    held_.erase(0, newline + 1);
    while (held_.size() < status->body_bytes) {
      if (!receive(end)) return std::nullopt;
    }
    Reply reply{status->ok, held_.substr(0, status->body_bytes)};
    held_.erase(0, status->body_bytes);
    return reply;
  }

  // True when the server closes the connection within `timeout` (whatever it sends before is dropped).
  bool closed_by_server(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (receive(end)) held_.clear();
    return eof_;
  }

 private:
  // One receive before `end`; false on end of file, an error or the deadline.
  bool receive(std::chrono::steady_clock::time_point end) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;  // end of file, or the connection reset: closed either way
      return false;
    }
    held_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool eof_ = false;
  std::string held_;
};

}  // namespace phub::ctl::test

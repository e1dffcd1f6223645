// The client end of the control socket: connect, send one request, read one framed answer, in time.
#include "phub/ctl/client.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "phub/ctl/protocol.hpp"
#include "phub/base/unique_fd.hpp"
#include "unix_address.hpp"

namespace phub::ctl {
namespace {

using Clock = std::chrono::steady_clock;

Unexpected<CallError> failed(CallError::Kind kind, std::string message, int errno_value = 0) {
  return unexpected(CallError{kind, std::move(message), errno_value});
}

// Waits until fd is ready for `events` or the deadline passes; false on the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the next system call reports the error
  }
}

Expected<UniqueFd, CallError> connect_to(const std::string& path, Clock::time_point deadline) {
  auto addr = unix_address(path);
  if (!addr) return failed(CallError::Kind::connect, addr.error());
  for (;;) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return failed(CallError::Kind::broken, std::string("socket: ") + std::strerror(errno));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0) return fd;
    if (errno != EAGAIN) {
      return failed(CallError::Kind::connect, std::string("connect: ") + std::strerror(errno), errno);
    }
    // The server's backlog is full: it is there but busy.
    if (Clock::now() >= deadline) return failed(CallError::Kind::timeout, "the server accepted no connection in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Sends the request. A server that closes early (too many clients) may have answered why: a failed
// send is not final, the answer is read all the same.
void send_request(int fd, std::string_view request, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < request.size() && wait_for(fd, POLLOUT, deadline)) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return;
    }
  }
}

// Reads until `want` bytes are held (or, with stop_at_newline, a newline is among them).
Expected<void, CallError> read_into(int fd, std::string& held, size_t want, bool stop_at_newline,
                                    Clock::time_point deadline) {
  char chunk[65536];
  while (held.size() < want && !(stop_at_newline && held.find('\n') != std::string::npos)) {
    if (!wait_for(fd, POLLIN, deadline)) return failed(CallError::Kind::timeout, "no answer in time");
    const size_t room = stop_at_newline ? want - held.size() : std::min(sizeof chunk, want - held.size());
    const ssize_t n = ::recv(fd, chunk, std::min(room, sizeof chunk), 0);
    if (n > 0) {
      held.append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      return failed(CallError::Kind::broken, "the server closed the connection after " + std::to_string(held.size()) +
                                                 " bytes of the answer");
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return failed(CallError::Kind::broken, std::string("receive: ") + std::strerror(errno));
    }
  }
  return {};
}

}  // namespace

Expected<Reply, CallError> call(const std::string& path, std::string_view request, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto fd = connect_to(path, deadline);
  if (!fd) return unexpected(fd.error());
  send_request(fd->get(), request, deadline);

  std::string held;
  if (auto got = read_into(fd->get(), held, kMaxStatusLineBytes, true, deadline); !got) return unexpected(got.error());
  const size_t newline = held.find('\n');
  if (newline == std::string::npos) {
    return failed(CallError::Kind::broken, "no status line in the first " + std::to_string(held.size()) +
                                               " bytes of the answer: " + excerpt(held));
  }
  auto status = parse_status_line(std::string_view(held).substr(0, newline));
  if (!status) return failed(CallError::Kind::broken, status.error());
  held.erase(0, newline + 1);
  const size_t body_bytes = static_cast<size_t>(status->body_bytes);
  if (held.size() > body_bytes) return failed(CallError::Kind::broken, "the server sent more than its answer");
  if (auto got = read_into(fd->get(), held, body_bytes, false, deadline); !got) return unexpected(got.error());
  return Reply{status->ok, std::move(held)};
}

}  // namespace phub::ctl

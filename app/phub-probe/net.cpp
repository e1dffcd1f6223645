// Socket helpers for the probe agent and coordinator.
#include "net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "phub/base/ipv4.hpp"

namespace phub::probe {
namespace {

constexpr size_t kMaxLine = 64 * 1024;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Waits for `events` on fd until the absolute monotonic deadline; false on timeout.
bool wait_for(int fd, short events, uint64_t deadline_ns) {
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline_ns) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>((deadline_ns - now + 999'999) / 1'000'000));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

}  // namespace

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

Expected<sockaddr_in, std::string> make_sockaddr(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  auto ip = parse_ipv4_address(addr);
  if (!ip) return unexpected(ip.error());
  sa.sin_addr.s_addr = htonl(*ip);
  return sa;
}

Expected<UniqueFd, std::string> tcp_listen(const std::string& addr, uint16_t port) {
  auto sa = make_sockaddr(addr, port);
  if (!sa) return unexpected(sa.error());
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return unexpected(errno_text("socket"));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*sa), sizeof *sa) != 0)
    return unexpected(errno_text(("bind " + addr + ":" + std::to_string(port)).c_str()));
  if (::listen(fd.get(), 64) != 0) return unexpected(errno_text("listen"));
  return fd;
}

Expected<UniqueFd, std::string> tcp_connect(const std::string& addr, uint16_t port, int timeout_ms) {
  auto sa = make_sockaddr(addr, port);
  if (!sa) return unexpected(sa.error());
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return unexpected(errno_text("socket"));
  const std::string where = addr + ":" + std::to_string(port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*sa), sizeof *sa) != 0) {
    if (errno != EINPROGRESS) return unexpected(errno_text(("connect " + where).c_str()));
    if (!wait_for(fd.get(), POLLOUT, monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000u))
      return unexpected("connect " + where + ": timed out");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return unexpected("connect " + where + ": " + std::strerror(err));
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Expected<std::string, std::string> LineConn::read_line(int timeout_ms) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000u;
  for (;;) {
    if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return line;
    }
    if (buf_.size() > kMaxLine) return unexpected(std::string("line too long"));
    if (!wait_for(fd_.get(), POLLIN, deadline)) return unexpected(std::string("timed out"));
    char tmp[4096];
    const ssize_t n = ::recv(fd_.get(), tmp, sizeof tmp, 0);
    if (n == 0) return unexpected(std::string("connection closed"));
    if (n < 0 && errno != EINTR) return unexpected(errno_text("recv"));
    if (n > 0) buf_.append(tmp, static_cast<size_t>(n));
  }
}

Expected<void, std::string> LineConn::drain(uint64_t bytes, int timeout_ms) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000u;
  const uint64_t buffered = std::min<uint64_t>(bytes, buf_.size());
  buf_.erase(0, buffered);
  bytes -= buffered;
  char tmp[65536];
  while (bytes > 0) {
    if (!wait_for(fd_.get(), POLLIN, deadline)) return unexpected(std::string("timed out"));
    const ssize_t n = ::recv(fd_.get(), tmp, std::min<uint64_t>(sizeof tmp, bytes), 0);
    if (n == 0) return unexpected(std::string("connection closed"));
    if (n < 0 && errno != EINTR) return unexpected(errno_text("recv"));
    if (n > 0) bytes -= static_cast<uint64_t>(n);
  }
  return {};
}

Expected<void, std::string> LineConn::write_all(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return unexpected(errno_text("send"));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace phub::probe

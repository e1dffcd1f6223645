// Plain UNIX stream sockets for tests that play a client or a server by hand.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace phub::ctl::test {

inline sockaddr_un address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  return addr;
}

enum class Then { bind, connect };

// A blocking socket bound to `path` (the socket file exists from then on) or connected to it; -1 on failure.
inline int unix_socket(const std::string& path, Then then) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_un addr = address_of(path);
  const auto* a = reinterpret_cast<const sockaddr*>(&addr);
  if (fd >= 0 && (then == Then::bind ? ::bind(fd, a, sizeof addr) : ::connect(fd, a, sizeof addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace phub::ctl::test

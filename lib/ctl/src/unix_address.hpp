// The sockaddr_un of a filesystem path, checked to fit.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>

#include "phub/base/expected.hpp"

namespace phub::ctl {

[[nodiscard]] inline Expected<sockaddr_un, std::string> unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty()) return unexpected(std::string("the socket path is empty"));
  if (path.find('\0') != std::string::npos) return unexpected("the socket path " + path + " holds a NUL byte");
  if (path.size() >= sizeof addr.sun_path) {
    return unexpected("the socket path " + path + " is " + std::to_string(path.size()) + " bytes, more than the " +
                      std::to_string(sizeof addr.sun_path - 1) + " a UNIX socket address holds");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace phub::ctl

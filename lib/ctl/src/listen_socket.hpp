// The listening UNIX socket at a path: created mode 0600, a stale socket file replaced, removed on close.
#pragma once

#include <sys/types.h>

#include <string>

#include "phub/base/expected.hpp"
#include "phub/base/unique_fd.hpp"

namespace phub::ctl {

class ListenSocket {
 public:
  // Creates the parent directory (mode 0700) if it is missing, removes a socket file nobody listens
  // on, and refuses a path that is not a socket or that a server answers on. The socket is
  // non-blocking and never more open than 0600, not even between bind and chmod.
  [[nodiscard]] static Expected<ListenSocket, std::string> open(const std::string& path, int backlog);

  ListenSocket(ListenSocket&& other) noexcept;
  ListenSocket& operator=(ListenSocket&&) = delete;
  ListenSocket(const ListenSocket&) = delete;
  ListenSocket& operator=(const ListenSocket&) = delete;
  // Closes the socket and removes its file, if the file is still this socket's.
  ~ListenSocket();

  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  ListenSocket() = default;

  UniqueFd fd_;
  std::string path_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace phub::ctl

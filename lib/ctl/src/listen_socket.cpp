// The listening UNIX socket at a path: directory, stale file, 0600 mode, and removal on close.
#include "listen_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "unix_address.hpp"

namespace phub::ctl {
namespace {

Unexpected<std::string> sys_fail(const std::string& path, const std::string& what) {
  return unexpected("control socket " + path + ": " + what + ": " + std::strerror(errno));
}

Expected<void, std::string> ensure_parent_directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return {};
  const std::string parent = path.substr(0, slash);
  if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) return sys_fail(path, "mkdir " + parent);
  return {};
}

// A socket file whose server is gone refuses connections: remove it. Anything else stays.
Expected<void, std::string> remove_stale_socket(const std::string& path, const sockaddr_un& addr) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return sys_fail(path, "lstat");
  }
  if (!S_ISSOCK(st.st_mode)) {
    return unexpected("control socket " + path + ": the path exists and is not a socket; not removing it");
  }
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return sys_fail(path, "socket");
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 || errno == EAGAIN) {
    return unexpected("control socket " + path + ": a server is listening on it (another phub-server?)");
  }
  if (errno == ENOENT) return {};
  if (errno != ECONNREFUSED) return sys_fail(path, "cannot tell whether a server listens: connect");
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return sys_fail(path, "unlink the stale socket");
  return {};
}

}  // namespace

Expected<ListenSocket, std::string> ListenSocket::open(const std::string& path, int backlog) {
  auto addr = unix_address(path);
  if (!addr) return unexpected("control socket: " + addr.error());
  if (auto made = ensure_parent_directory(path); !made) return unexpected(made.error());
  if (auto removed = remove_stale_socket(path, *addr); !removed) return unexpected(removed.error());

  ListenSocket s;
  s.path_ = path;
  s.fd_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.fd_.valid()) return sys_fail(path, "socket");
  // bind creates the file with the socket's mode less the umask. The socket's mode is 0600 and, around the
  // bind only, the umask takes nothing from it: the file is 0600 from its first moment, and nothing is ever
  // changed by path afterwards (a chmod by path would follow whatever replaced the file meanwhile).
  if (::fchmod(s.fd_.get(), 0600) != 0) return sys_fail(path, "fchmod");
  const mode_t umask_before = ::umask(0177);
  const int bound = ::bind(s.fd_.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  const int bind_errno = errno;
  ::umask(umask_before);
  errno = bind_errno;
  if (bound != 0) return sys_fail(path, "bind");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return sys_fail(path, "lstat");
  if (!S_ISSOCK(st.st_mode) || (st.st_mode & 07777) != 0600) {
    return unexpected("control socket " + path + ": replaced by something else right after the bind");
  }
  s.device_ = st.st_dev;
  s.inode_ = st.st_ino;
  if (::listen(s.fd_.get(), backlog) != 0) return sys_fail(path, "listen");
  return s;
}

ListenSocket::ListenSocket(ListenSocket&& other) noexcept
    : fd_(std::move(other.fd_)), path_(std::move(other.path_)), device_(other.device_), inode_(other.inode_) {
  other.path_.clear();
}

ListenSocket::~ListenSocket() {
  if (!fd_.valid() || path_.empty()) return;
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == device_ && st.st_ino == inode_) {
    (void)::unlink(path_.c_str());
  }
}

}  // namespace phub::ctl

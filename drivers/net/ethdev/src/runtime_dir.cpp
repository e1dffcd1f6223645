// Removing an EAL runtime directory without following symbolic links: every step goes through a directory
// descriptor opened with O_NOFOLLOW, so a link put anywhere in the tree is unlinked, never entered.
#include "phub/drivers/runtime_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "phub/base/eal_args.hpp"

namespace phub::drivers {
namespace {

std::string why(const std::string& path, const char* step) {
  return "EAL runtime directory " + path + ": " + step + ": " + std::strerror(errno);
}

// Removes the directory `name` inside the directory open as `parent_fd` (`path` names it in errors).
Expected<void, std::string> remove_tree_at(int parent_fd, const std::string& name, const std::string& path) {
  const int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    // ELOOP: a symbolic link; ENOTDIR: not a directory. Neither is what the EAL made, both stay.
    return unexpected(why(path, "not opened as a directory (left as it is)"));
  }
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    const auto err = why(path, "fdopendir");
    close(fd);
    return unexpected(err);
  }
  Expected<void, std::string> result;
  while (dirent* e = readdir(dir)) {
    const std::string entry = e->d_name;
    if (entry == "." || entry == "..") continue;
    struct stat st {};
    if (fstatat(fd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      result = unexpected(why(path + "/" + entry, "fstatat"));
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      result = remove_tree_at(fd, entry, path + "/" + entry);
      if (!result) break;
    } else if (unlinkat(fd, entry.c_str(), 0) != 0 && errno != ENOENT) {
      result = unexpected(why(path + "/" + entry, "unlink"));
      break;
    }
  }
  closedir(dir);  // closes fd
  if (!result) return result;
  if (unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return unexpected(why(path, "rmdir"));
  return {};
}

}  // namespace

Expected<void, std::string> remove_runtime_dir(std::string_view prefix) {
  const std::string path = std::string(kDpdkRuntimeRoot) + "/" + std::string(prefix);
  if (!is_own_runtime_dir(path, prefix)) {
    return unexpected("EAL runtime directory: \"" + std::string(prefix) + "\" is not a plain file prefix");
  }
  const int root = open(std::string(kDpdkRuntimeRoot).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    if (errno == ENOENT) return {};
    return unexpected(why(std::string(kDpdkRuntimeRoot), "open"));
  }
  auto removed = remove_tree_at(root, std::string(prefix), path);
  close(root);
  return removed;
}

}  // namespace phub::drivers

// include(path): a config file runs another Lua file from its own directory, in the same sandbox and
// under the same budget, and gets the value it returns.
//
// The path is relative to the including file's directory, without ".." and not absolute; resolved
// (symlinks included) it must still lie below the config's directory, be a regular file of at most
// kMaxIncludeBytes, and not be a file that is being run already (a cycle). Text only, like the config.
//
// sandbox_include runs inside Lua and may raise (a longjmp): the C++ work is done in open_include, whose
// objects are gone before it returns, and messages are built in Includes::message, which the loader owns.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lua.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "reader.hpp"
#include "sandbox.hpp"

namespace phub::config::detail {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxInnerMessage = 200;  // bytes of an included file's error message kept when it is wrapped

// True when `path` lies below `dir` (both canonical).
bool below(const fs::path& dir, const fs::path& path) {
  auto d = dir.begin();
  auto p = path.begin();
  for (; d != dir.end(); ++d, ++p) {
    if (p == path.end() || *d != *p) return false;
  }
  return p != path.end();
}

// Reads a regular file of at most `limit` bytes; on failure says why in `why`.
bool read_regular(const fs::path& path, size_t limit, std::string& text, std::string& why) {
  // O_NONBLOCK: a FIFO opens without waiting for a writer, and is refused below as not a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    why = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  if (!ok) {
    why = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
    ok = false;
  } else if (static_cast<uint64_t>(st.st_size) > limit) {
    why = "the file has " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(limit) +
          " an included file may have";
    ok = false;
  }
  if (ok) {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (ok && got < text.size()) {
      ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) why = std::string("cannot read: ") + std::strerror(errno);
      ok = n > 0;
      if (ok) got += static_cast<size_t>(n);
    }
    if (!ok && why.empty()) why = "the file shrank while it was read";
  }
  ::close(fd);
  return ok;
}

// Resolves, checks and reads `rel` for the innermost open file. On success pushes the file onto
// inc.open; on failure leaves the message in inc.message.
bool open_include(Includes& inc, std::string_view rel, const LoadLimits& limits) {
  inc.message = "include " + quote(rel) + ": ";
  auto refuse = [&](const std::string& why) {
    inc.message += why;
    return false;
  };
  if (rel.empty()) return refuse("an empty path");
  if (rel.size() > kMaxIncludePath) return refuse("a path longer than " + std::to_string(kMaxIncludePath) + " bytes");
  if (rel.find('\0') != std::string_view::npos) return refuse("a path with a NUL byte");
  if (rel.front() == '/') return refuse("an absolute path (give one relative to the including file's directory)");
  for (size_t start = 0; start <= rel.size();) {
    size_t end = std::min(rel.find('/', start), rel.size());
    if (rel.substr(start, end - start) == "..") return refuse("a path with \"..\" (included files lie below the config's directory)");
    start = end + 1;
  }
  if (inc.count >= kMaxIncludes) return refuse("more than " + std::to_string(kMaxIncludes) + " files included by one config");
  if (inc.open.size() > kMaxIncludeDepth) {
    return refuse("includes nested deeper than " + std::to_string(kMaxIncludeDepth) + " files");
  }
  const IncludeFile& parent = inc.open.back();
  std::error_code ec;
  fs::path path = fs::canonical(fs::path(parent.dir) / fs::path(rel), ec);
  if (ec) return refuse("cannot resolve: " + ec.message());
  if (!below(fs::path(inc.root), path)) {
    return refuse("resolves to a file outside the config's directory " + quote(inc.root));
  }
  std::string display = (fs::path(parent.display).parent_path() / fs::path(rel)).lexically_normal().string();
  // A cycle is named from the file that comes round again, by paths relative to the config's directory.
  fs::path top = fs::path(inc.open.front().display).parent_path();
  auto named = [&](const std::string& d) { return quote(fs::path(d).lexically_relative(top).string()); };
  for (auto f = inc.open.begin(); f != inc.open.end(); ++f) {
    if (f->id != path.string()) continue;
    std::string chain;
    for (auto g = f; g != inc.open.end(); ++g) chain += named(g->display) + " -> ";
    return refuse("a cycle: " + chain + named(display));
  }
  std::string text;
  std::string why;
  if (!read_regular(path, std::min(kMaxIncludeBytes, limits.max_memory_bytes), text, why)) return refuse(why);
  inc.open.push_back({path.string(), path.parent_path().string(), display, "@" + display, std::move(text)});
  ++inc.count;
  return true;
}

// Parses and runs the innermost open file (protected by sandbox_include): its value, or an error.
int include_body(lua_State* L) {
  IncludeFile& f = budget_of(L).includes->open.back();
  if (load_text_chunk(L, f.text.data(), f.text.size(), f.chunkname.c_str()) != LUA_OK) return lua_error(L);
  std::string().swap(f.text);  // parsed: the text is not needed while the chunk runs
  lua_call(L, 0, 1);
  return 1;
}

}  // namespace

int sandbox_include(lua_State* L) {
  size_t len = 0;
  luaL_checktype(L, 1, LUA_TSTRING);  // not a number turned into a name
  const char* rel = lua_tolstring(L, 1, &len);
  lua_settop(L, 1);
  charge(L, 1 + len / kBytesPerUnit);
  Includes* inc = budget_of(L).includes;
  if (inc == nullptr || inc->open.empty()) {
    return luaL_error(L, "include: only a config loaded from a file can include files");
  }
  if (!open_include(*inc, std::string_view(rel, len), budget_of(L).limits)) return luaL_error(L, "%s", inc->message.c_str());
  // Nothing may raise between the push in open_include and the pop after the protected call.
  lua_pushcfunction(L, include_body);
  int status = lua_pcall(L, 0, 1, 0);
  inc->open.pop_back();
  reraise_if_hit(L);  // a limit hit inside the included file ends the whole load
  if (status == LUA_OK) return 1;
  if (lua_type(L, -1) != LUA_TSTRING) return lua_error(L);  // an error object: passed on as it is
  // "<including file>:<line>: include \"<path>\": <the included file's message, cut>", once: the innermost
  // include names where the error is, and the includes around it pass that message on.
  size_t n = 0;
  const char* inner = lua_tolstring(L, -1, &n);
  if (std::string_view(inner, n) == inc->wrapped) return lua_error(L);
  inc->message = "include " + quote(std::string_view(rel, len)) + ": " + excerpt(std::string_view(inner, n), kMaxInnerMessage);
  luaL_where(L, 1);
  lua_pushlstring(L, inc->message.data(), inc->message.size());
  lua_concat(L, 2);
  inner = lua_tolstring(L, -1, &n);
  inc->wrapped.assign(inner, n);
  return lua_error(L);
}

}  // namespace phub::config::detail

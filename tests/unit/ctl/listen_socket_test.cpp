// Where the control socket lives: mode 0600, a stale file replaced, anything else left alone.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fake_handler.hpp"
#include "phub/ctl/server.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

namespace phub::ctl {
namespace {

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

// A socket file with nobody listening: what a killed server leaves behind.
void leave_stale_socket(const std::string& path) {
  const int fd = test::unix_socket(path, test::Then::bind);
  ASSERT_GE(fd, 0);
  ::close(fd);
}

class ListenSocketTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
  test::FakeHandler handler_;
};

TEST_F(ListenSocketTest, TheSocketIsMode0600WhateverTheUmask) {
  // 0377 and 0777 take the owner's bits too: the socket is still 0600, with no chmod by path after the bind.
  for (const mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0177}, mode_t{0377}, mode_t{0777}}) {
    const mode_t old = ::umask(mask);
    auto server = ControlServer::open(dir_.file("ctl.sock"), handler_);
    EXPECT_EQ(::umask(old), mask) << "opening the socket left the process's umask changed";
    ASSERT_TRUE(server.has_value()) << server.error();
    const mode_t mode = mode_of(dir_.file("ctl.sock"));
    EXPECT_TRUE(S_ISSOCK(mode));
    EXPECT_EQ(mode & 07777, 0600u) << "umask " << mask;
  }
}

TEST_F(ListenSocketTest, ClosingRemovesTheSocketFile) {
  {
    auto server = ControlServer::open(dir_.file("ctl.sock"), handler_);
    ASSERT_TRUE(server.has_value()) << server.error();
    EXPECT_EQ((*server)->path(), dir_.file("ctl.sock"));
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir_.file("ctl.sock"))));
}

TEST_F(ListenSocketTest, AStaleSocketIsReplaced) {
  leave_stale_socket(dir_.file("ctl.sock"));
  auto server = ControlServer::open(dir_.file("ctl.sock"), handler_);
  ASSERT_TRUE(server.has_value()) << server.error();
}

TEST_F(ListenSocketTest, ALiveServersSocketIsNotTaken) {
  auto first = ControlServer::open(dir_.file("ctl.sock"), handler_);
  ASSERT_TRUE(first.has_value()) << first.error();
  auto second = ControlServer::open(dir_.file("ctl.sock"), handler_);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error(), "control socket " + dir_.file("ctl.sock") +
                                ": a server is listening on it (another phub-server?)");
  EXPECT_TRUE(S_ISSOCK(mode_of(dir_.file("ctl.sock"))));
}

TEST_F(ListenSocketTest, ASocketFileReplacedByAnotherServerIsNotRemoved) {
  auto first = ControlServer::open(dir_.file("ctl.sock"), handler_);
  ASSERT_TRUE(first.has_value()) << first.error();
  ASSERT_EQ(::unlink(dir_.file("ctl.sock").c_str()), 0);  // an operator, or a second server after a stale check
  auto second = ControlServer::open(dir_.file("ctl.sock"), handler_);
  ASSERT_TRUE(second.has_value()) << second.error();
  first->reset();
  EXPECT_TRUE(S_ISSOCK(mode_of(dir_.file("ctl.sock"))));
}

TEST_F(ListenSocketTest, APathThatIsNotASocketIsRefusedAndKept) {
  std::ofstream(dir_.file("ctl.sock")) << "precious";
  auto server = ControlServer::open(dir_.file("ctl.sock"), handler_);
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.error(),
            "control socket " + dir_.file("ctl.sock") + ": the path exists and is not a socket; not removing it");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.file("ctl.sock")));
}

TEST_F(ListenSocketTest, AMissingDirectoryIsCreatedPrivate) {
  const std::string path = dir_.file("run/ctl.sock");
  auto server = ControlServer::open(path, handler_);
  ASSERT_TRUE(server.has_value()) << server.error();
  EXPECT_EQ(mode_of(dir_.file("run")) & 07777, 0700u);
}

TEST_F(ListenSocketTest, UnusablePathsAreRefusedWithTheReason) {
  auto too_long = ControlServer::open("/tmp/" + std::string(120, 'x'), handler_);
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.error().find("is 125 bytes, more than the 107 a UNIX socket address holds"), std::string::npos)
      << too_long.error();
  auto no_dir = ControlServer::open(dir_.file("a/b/ctl.sock"), handler_);
  ASSERT_FALSE(no_dir.has_value());
  EXPECT_NE(no_dir.error().find(": mkdir " + dir_.file("a/b") + ": No such file or directory"), std::string::npos)
      << no_dir.error();
}

}  // namespace
}  // namespace phub::ctl

// The client end: no server, a server that never answers, a broken or malformed answer.
#include "phub/ctl/client.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "temp_dir.hpp"
#include "unix_socket.hpp"

namespace phub::ctl {
namespace {

using namespace std::chrono_literals;

class CallTest : public ::testing::Test {
 protected:
  // A listening socket at path() that the test drives by hand.
  void listen_by_hand() {
    listener_ = test::unix_socket(path(), test::Then::bind);
    ASSERT_GE(listener_, 0);
    ASSERT_EQ(::listen(listener_, 4), 0);
  }
  ~CallTest() override {
    if (listener_ >= 0) ::close(listener_);
  }
  std::string path() const { return dir_.file("ctl.sock"); }

  // call() against a server that reads the request line and answers exactly `answer`.
  Expected<Reply, CallError> call_answered_by(const std::string& answer) {
    listen_by_hand();
    std::thread server([this, answer] {
      const int c = ::accept(listener_, nullptr, nullptr);
      char byte = 0;
      while (::recv(c, &byte, 1, 0) == 1 && byte != '\n') {
      }
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    });
    auto result = call(path(), "status\n", 2s);
    server.join();
    return result;
  }

  static CallError error_of(const Expected<Reply, CallError>& answer) {
    EXPECT_FALSE(answer.has_value());
    return answer ? CallError{} : answer.error();
  }

  test::TempDir dir_;
  int listener_ = -1;
};

TEST_F(CallTest, NoSocketFileIsAConnectError) {
  const CallError e = error_of(call(path(), "status\n", 1s));
  EXPECT_EQ(e.kind, CallError::Kind::connect);
  EXPECT_EQ(e.errno_value, ENOENT);
  EXPECT_EQ(e.message, "connect: No such file or directory");
}

TEST_F(CallTest, AStaleSocketFileIsAConnectError) {
  ::close(test::unix_socket(path(), test::Then::bind));
  const CallError e = error_of(call(path(), "status\n", 1s));
  EXPECT_EQ(e.kind, CallError::Kind::connect);
  EXPECT_EQ(e.errno_value, ECONNREFUSED);
}

TEST_F(CallTest, AServerThatNeverAnswersTimesOut) {
  listen_by_hand();  // listens, never accepts
  const auto t0 = std::chrono::steady_clock::now();
  const CallError e = error_of(call(path(), "status\n", 200ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(e.kind, CallError::Kind::timeout);
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 2s);
}

TEST_F(CallTest, AnAnswerCutShortIsBroken) {
  const CallError e = error_of(call_answered_by("ok 10\nabc"));
  EXPECT_EQ(e.kind, CallError::Kind::broken);
  EXPECT_EQ(e.message, "the server closed the connection after 3 bytes of the answer");
}

TEST_F(CallTest, AnAnswerNotInTheProtocolsFormIsBroken) {
  const CallError e = error_of(call_answered_by("HTTP/1.1 200 OK\r\n\r\n"));
  EXPECT_EQ(e.kind, CallError::Kind::broken);
  EXPECT_EQ(e.message, "not an answer's status line (expected 'ok' or 'error' first): 'HTTP/1.1 200 OK\\x0d'");
}

TEST_F(CallTest, AWellFormedAnswerIsReturned) {
  auto answer = call_answered_by("error 4\nno!\n");
  ASSERT_TRUE(answer.has_value()) << answer.error().message;
  EXPECT_EQ(*answer, Reply::failure("no!\n"));
}

}  // namespace
}  // namespace phub::ctl

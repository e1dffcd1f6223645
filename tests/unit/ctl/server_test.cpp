// The control socket over a real UNIX socket: commands, many clients, and clients that misbehave.
#include "phub/ctl/server.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fake_handler.hpp"
#include "phub/ctl/client.hpp"
#include "phub/ctl/protocol.hpp"
#include "raw_client.hpp"
#include "server_thread.hpp"
#include "temp_dir.hpp"

namespace phub::ctl {
namespace {

using namespace std::chrono_literals;
using test::FakeHandler;
using test::RawClient;
using test::ServerThread;

class ControlServerTest : public ::testing::Test {
 protected:
  // Opens the server at path() and polls it on a thread.
  void start(ServerLimits limits = {}) {
    auto server = ControlServer::open(path(), handler_, limits);
    ASSERT_TRUE(server.has_value()) << server.error();
    thread_ = std::make_unique<ServerThread>(std::move(*server));
  }
  std::string path() const { return dir_.file("ctl.sock"); }

  Reply ask(const std::vector<std::string>& words) {
    auto answer = call(path(), format_request(words), 5s);
    EXPECT_TRUE(answer.has_value()) << (answer ? "" : answer.error().message);
    return answer ? *answer : Reply::failure("no answer");
  }

  test::TempDir dir_;
  FakeHandler handler_;  // before thread_: the server's thread uses it until it stops
  std::unique_ptr<ServerThread> thread_;
};

TEST_F(ControlServerTest, AnswersCommands) {
  start();
  EXPECT_EQ(ask({"status"}), Reply::success("ready\n"));
  EXPECT_EQ(ask({"job", "with space"}), Reply::success("job with space\n"));
  EXPECT_EQ(ask({"job", "nosuch"}), Reply::failure("no job named 'nosuch'\n"));
  EXPECT_EQ(ask({"reload", "/etc/phub/a b.lua"}), Reply::success("reloaded from /etc/phub/a b.lua\n"));
  const Reply unknown = ask({"foo"});
  EXPECT_FALSE(unknown.ok);
  EXPECT_EQ(unknown.body.substr(0, 33), "unknown command 'foo'; commands: ");
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t) { return c.requests == 5; }));
  EXPECT_EQ(thread_->counters().requests_failed, 2u);
}

TEST_F(ControlServerTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  RawClient c(path());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("version\nstatus\r\njob alpha\n\n"));
  EXPECT_EQ(c.read_answer(), Reply::success("phub 0.1.0\n"));
  EXPECT_EQ(c.read_answer(), Reply::success("ready\n"));
  EXPECT_EQ(c.read_answer(), Reply::success("job alpha\n"));
  auto empty = c.read_answer();
  ASSERT_TRUE(empty.has_value());
  EXPECT_FALSE(empty->ok);
}

TEST_F(ControlServerTest, AClientThatSendsEndOfFileStillGetsItsAnswer) {
  start();
  RawClient c(path());
  ASSERT_TRUE(c.send("version\n"));
  c.shutdown_write();
  EXPECT_EQ(c.read_answer(), Reply::success("phub 0.1.0\n"));
  EXPECT_TRUE(c.closed_by_server());
}

TEST_F(ControlServerTest, ALineCutOffByADisconnectIsNeverExecuted) {
  start();
  {
    RawClient c(path());
    ASSERT_TRUE(c.send("reset alpha"));  // no newline: the client goes before finishing its request
  }
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t n) { return c.clients_lost == 1 && n == 0; }));
  EXPECT_TRUE(handler_.calls().empty());
  EXPECT_EQ(ask({"version"}), Reply::success("phub 0.1.0\n"));
}

TEST_F(ControlServerTest, AClientGoneBeforeItsAnswerCostsNothing) {
  handler_.config_bytes = 8 << 20;  // more than the socket buffers hold: the answer is under way when it goes
  start();
  {
    RawClient c(path());
    ASSERT_TRUE(c.send("config\n"));
    ASSERT_TRUE(thread_->wait_until([](const ServerCounters& k, size_t) { return k.requests == 1; }));
  }
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t n) { return c.clients_lost == 1 && n == 0; }));
  EXPECT_EQ(ask({"version"}), Reply::success("phub 0.1.0\n"));
}

TEST_F(ControlServerTest, GarbageIsAnsweredWithErrorsAndHurtsNobody) {
  start();
  std::mt19937 rng(14);
  std::string garbage(256 * 1024, '\0');
  for (auto& b : garbage) b = static_cast<char>(rng() % 256 < 8 ? '\n' : rng() % 256);
  RawClient c(path());
  std::thread sender([&] { (void)c.send(garbage); c.shutdown_write(); });
  size_t errors = 0;
  while (auto answer = c.read_answer(2s)) errors += answer->ok ? 0 : 1;
  sender.join();
  EXPECT_GT(errors, 100u);
  EXPECT_EQ(ask({"version"}), Reply::success("phub 0.1.0\n"));
}

TEST_F(ControlServerTest, AGibibyteLineIsRefusedEarlyWhileOthersAreServed) {
  start();
  RawClient streamer(path());
  ASSERT_TRUE(streamer.connected());
  std::atomic<uint64_t> sent_bytes{0};
  std::thread sender([&] {
    const std::string chunk(64 * 1024, 'a');
    timeval five_s{5, 0};  // the send fails once the server closes; this only bounds a broken server
    (void)setsockopt(streamer.fd(), SOL_SOCKET, SO_SNDTIMEO, &five_s, sizeof five_s);
    while (sent_bytes < (uint64_t{1} << 30)) {
      const ssize_t n = ::send(streamer.fd(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent_bytes += static_cast<uint64_t>(n);
    }
  });
  EXPECT_EQ(ask({"version"}), Reply::success("phub 0.1.0\n"));  // meanwhile
  sender.join();
  std::printf("the 1 GiB line stopped after %llu bytes\n", static_cast<unsigned long long>(sent_bytes.load()));
  EXPECT_LT(sent_bytes.load(), uint64_t{4} << 20) << "the server went on reading the line";
  auto refusal = streamer.read_answer();
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(*refusal, Reply::failure("request longer than 4096 bytes (newline included); closing the connection\n"));
  EXPECT_TRUE(streamer.closed_by_server());
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t) { return c.requests_too_long == 1; }));
  EXPECT_EQ(ask({"status"}), Reply::success("ready\n"));
}

TEST_F(ControlServerTest, ManyClientsAtOnce) {
  start();
  std::vector<std::thread> clients;
  std::atomic<int> right{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const bool alpha = (t + i) % 2 == 0;
        auto answer = call(path(), alpha ? "job alpha\n" : "version\n", 10s);
        if (answer && *answer == Reply::success(alpha ? "job alpha\n" : "phub 0.1.0\n")) {
          ++right;
        } else {
          ADD_FAILURE() << (answer ? answer->body : answer.error().message);
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(right.load(), 200);
}

TEST_F(ControlServerTest, ClientsOverTheLimitAreToldAndClosed) {
  ServerLimits limits;
  limits.max_clients = 2;
  start(limits);
  RawClient a(path()), b(path());
  ASSERT_TRUE(thread_->wait_until([](const ServerCounters&, size_t n) { return n == 2; }));
  auto refused = call(path(), "version\n", 5s);
  ASSERT_TRUE(refused.has_value()) << refused.error().message;
  EXPECT_EQ(*refused, Reply::failure("too many control clients (2); try again; closing the connection\n"));
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t) { return c.clients_refused == 1; }));
  a.close();
  ASSERT_TRUE(thread_->wait_until([](const ServerCounters&, size_t n) { return n == 1; }));
  EXPECT_EQ(ask({"version"}), Reply::success("phub 0.1.0\n"));
}

TEST_F(ControlServerTest, IdleAndSlowClientsAreTimedOut) {
  ServerLimits limits;
  limits.request_timeout = 200ms;
  start(limits);
  RawClient idle(path()), slow(path());
  ASSERT_TRUE(slow.send("stat"));
  const std::string expected = "no complete request within 200 ms; closing the connection\n";
  EXPECT_EQ(idle.read_answer(), Reply::failure(expected));
  EXPECT_EQ(slow.read_answer(), Reply::failure(expected));
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_TRUE(slow.closed_by_server());
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t) { return c.request_timeouts == 2; }));
}

TEST_F(ControlServerTest, ASlowHandlerDoesNotTimeOutRequestsThatArrivedMeanwhile) {
  ServerLimits limits;
  limits.request_timeout = 300ms;
  handler_.slow_drain = 700ms;
  start(limits);
  RawClient waiting(path());
  ASSERT_TRUE(thread_->wait_until([](const ServerCounters&, size_t n) { return n == 1; }));
  RawClient slow(path());
  ASSERT_TRUE(thread_->wait_until([](const ServerCounters&, size_t n) { return n == 2; }));
  ASSERT_TRUE(slow.send("drain slow\n"));
  std::this_thread::sleep_for(100ms);  // the handler runs; the waiting client's deadline passes during it
  ASSERT_TRUE(waiting.send("version\n"));
  EXPECT_EQ(waiting.read_answer(), Reply::success("phub 0.1.0\n"));
  EXPECT_EQ(slow.read_answer(), Reply::success("draining slow\n"));
  EXPECT_EQ(thread_->counters().request_timeouts, 0u);
}

TEST_F(ControlServerTest, AClientThatDoesNotReadItsAnswerIsClosed) {
  ServerLimits limits;
  limits.answer_timeout = 300ms;
  handler_.config_bytes = 8 << 20;
  start(limits);
  RawClient hog(path());
  ASSERT_TRUE(hog.send("config\n"));  // and never reads
  ASSERT_TRUE(thread_->wait_until([](const ServerCounters& k, size_t) { return k.requests == 1; }));
  handler_.config_bytes = 16;
  EXPECT_EQ(ask({"version"}), Reply::success("phub 0.1.0\n"));  // served while the hog's answer waits
  EXPECT_TRUE(thread_->wait_until([](const ServerCounters& c, size_t n) { return c.answer_timeouts == 1 && n == 0; }));
}

TEST_F(ControlServerTest, AHandlerExceptionIsAnsweredAndTheServerGoesOn) {
  start();
  EXPECT_EQ(ask({"reset", "throw"}), Reply::failure("internal error: the engine said no\n"));
  EXPECT_EQ(ask({"reset", "alpha"}), Reply::success("reset alpha\n"));
}

}  // namespace
}  // namespace phub::ctl

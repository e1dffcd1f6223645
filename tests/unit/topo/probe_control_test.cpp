// phub-probe's control channel without processes: HMAC-SHA-256, the token handshake over a socket pair (right
// token, wrong token, a fake agent), line MACs against tampering and replay, token rules and the limits.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <future>
#include <string>

#include "auth.hpp"
#include "control.hpp"
#include "hosts_file.hpp"
#include "net.hpp"
#include "probe_body.hpp"

namespace phub::probe {
namespace {

constexpr const char* kToken = "0123456789abcdef-unit";

struct Pair {
  LineConn agent, initiator;
  static Pair make() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    return {LineConn(UniqueFd(fds[0])), LineConn(UniqueFd(fds[1]))};
  }
};

std::span<const uint8_t> bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

TEST(ProbeAuth, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", {bytes("what do ya want "), bytes("for nothing?")})),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_FALSE(mac_from_hex("5bdc"));
  EXPECT_FALSE(mac_from_hex(std::string(64, 'g')));
  EXPECT_TRUE(mac_from_hex(std::string(64, 'a')));
}

TEST(ProbeAuth, HandshakeWithTheTokenGivesBothSidesOneKey) {
  Pair p = Pair::make();
  auto agent = std::async(std::launch::async, [&] { return accept_handshake(p.agent, kToken, 2000); });
  auto mine = initiate_handshake(p.initiator, kToken, 2000);
  auto theirs = agent.get();
  ASSERT_TRUE(mine) << mine.error();
  ASSERT_TRUE(theirs) << theirs.error();
  EXPECT_EQ(*mine, *theirs);
  // Lines go both ways; each side checks the other's MACs and order.
  SecureLine a(p.agent, *theirs, false), i(p.initiator, *mine, true);
  ASSERT_TRUE(i.write_line("HELLO"));
  ASSERT_TRUE(i.write_line("PROBE 198.18.0.2 7700 4 1000 50000 64 4"));
  EXPECT_EQ(*a.read_line(1000), "HELLO");
  EXPECT_EQ(*a.read_line(1000), "PROBE 198.18.0.2 7700 4 1000 50000 64 4");
  ASSERT_TRUE(a.write_line("OK phub-probe 2"));
  EXPECT_EQ(*i.read_line(1000), "OK phub-probe 2");
}

TEST(ProbeAuth, WrongTokenIsRefusedAndSaysSo) {
  Pair p = Pair::make();
  auto agent = std::async(std::launch::async, [&] { return accept_handshake(p.agent, kToken, 2000); });
  auto mine = initiate_handshake(p.initiator, "another-token-of-length", 2000);
  auto theirs = agent.get();
  ASSERT_FALSE(theirs);
  EXPECT_NE(theirs.error().find("wrong proof"), std::string::npos) << theirs.error();
  ASSERT_FALSE(mine);
  EXPECT_NE(mine.error().find("refused the token"), std::string::npos) << mine.error();
}

TEST(ProbeAuth, AnAgentWithoutTheTokenCannotPoseAsOne) {
  Pair p = Pair::make();
  auto fake = std::async(std::launch::async, [&] {
    (void)p.agent.write_all(std::string(kChallengeWord) + " " + std::string(64, '1') + "\n");
    (void)p.agent.read_line(2000);
    (void)p.agent.write_all("OK " + std::string(64, '2') + "\n");  // it cannot compute the agent's proof
  });
  auto mine = initiate_handshake(p.initiator, kToken, 2000);
  fake.get();
  ASSERT_FALSE(mine);
  EXPECT_NE(mine.error().find("proof is wrong"), std::string::npos) << mine.error();
}

TEST(ProbeAuth, NoAnswerAndGarbageAreRefused) {
  Pair p = Pair::make();
  auto agent = std::async(std::launch::async, [&] { return accept_handshake(p.agent, kToken, 200); });
  EXPECT_FALSE(agent.get());  // silence until the deadline
  Pair q = Pair::make();
  auto agent2 = std::async(std::launch::async, [&] { return accept_handshake(q.agent, kToken, 2000); });
  (void)q.initiator.read_line(1000);
  ASSERT_TRUE(q.initiator.write_all("PROBE 198.18.0.2 7700 4 1000 50000 64 4\n"));
  auto r = agent2.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(*q.initiator.read_line(1000), "ERR authentication failed");
}

TEST(ProbeAuth, TamperedReplayedAndForgedLinesFail) {
  Pair p = Pair::make();
  auto agent = std::async(std::launch::async, [&] { return accept_handshake(p.agent, kToken, 2000); });
  auto key = initiate_handshake(p.initiator, kToken, 2000);
  ASSERT_TRUE(key);
  ASSERT_TRUE(agent.get());
  // What the initiator would send as its first two lines, captured.
  Pair capture = Pair::make();
  SecureLine writer(capture.initiator, *key, true);
  ASSERT_TRUE(writer.write_line("PROBE 198.18.0.2 7700 4 1000 50000 64 4"));
  const std::string first = *capture.agent.read_line(1000);
  SecureLine a(p.agent, *key, false);
  std::string altered = first;
  altered.replace(altered.find("198.18.0.2"), 10, "198.18.0.9");  // another target, the MAC kept
  ASSERT_TRUE(p.initiator.write_all(altered + "\n"));
  EXPECT_FALSE(a.read_line(1000));
  SecureLine a2(p.agent, *key, false);  // a fresh reader at sequence 0 takes the true line once ...
  ASSERT_TRUE(p.initiator.write_all(first + "\n" + first + "\n"));
  EXPECT_TRUE(a2.read_line(1000));
  EXPECT_FALSE(a2.read_line(1000));  // ... and not its replay
  SecureLine a3(p.agent, *key, false);
  ASSERT_TRUE(p.initiator.write_all("PROBE 198.18.0.2 7700 4 1000 50000 64 4\n"));  // no MAC at all
  EXPECT_FALSE(a3.read_line(1000));
  SecureLine other(p.agent, hmac_sha256("x", {}), false);  // another session's key
  ASSERT_TRUE(p.initiator.write_all(first + "\n"));
  EXPECT_FALSE(other.read_line(1000));
}

TEST(ProbeAuth, TokenRules) {
  EXPECT_EQ(*check_token("  0123456789abcdef\n", "t"), "0123456789abcdef");
  EXPECT_FALSE(check_token("short", "t"));
  EXPECT_FALSE(check_token("0123456789 abcdef", "t"));
  EXPECT_FALSE(check_token(std::string(257, 'a'), "t"));
  auto f = parse_hosts_file("token = 0123456789abcdef\na 198.18.1.1\nb 198.18.1.2:7701\n");
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->token, "0123456789abcdef");
  EXPECT_EQ(f->hosts.size(), 2u);
  EXPECT_FALSE(parse_hosts_file("token = 0123456789abcdef\ntoken = 0123456789abcdef\na 198.18.1.1\nb 198.18.1.2\n"));
  EXPECT_FALSE(parse_hosts_file("token = short\na 198.18.1.1\nb 198.18.1.2\n"));
  auto none = parse_hosts_file("a 198.18.1.1\nb 198.18.1.2\n");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->token.empty());
}

TEST(ProbeLimits, CoordinatorDefaultsPassAndEachLimitBites) {
  const ProbeParams defaults{32, 1000, 50000, 64, 4};
  EXPECT_EQ(probe_refusal(defaults), "");
  EXPECT_EQ(probe_refusal({400, 1000, 50000, 64, 4}), "");  // the probe-dpdk test's runs
  EXPECT_EQ(probe_refusal({Limits::kMaxSamples, Limits::kMinIntervalUs, 29'000, kMaxBodyBytes, 4}), "");
  EXPECT_NE(probe_refusal({Limits::kMaxSamples + 1, 1000, 50000, 64, 4}), "");
  EXPECT_NE(probe_refusal({0, 1000, 50000, 64, 0}), "");
  EXPECT_NE(probe_refusal({32, Limits::kMinIntervalUs - 1, 50000, 64, 4}), "");
  EXPECT_NE(probe_refusal({32, 1000, Limits::kMaxTimeoutUs + 1, 64, 4}), "");
  EXPECT_NE(probe_refusal({32, 1000, 50000, 23, 4}), "");
  EXPECT_NE(probe_refusal({32, 1000, 50000, 1025, 4}), "");
  EXPECT_NE(probe_refusal({4, 1000, 50000, 64, 5}), "");
  EXPECT_NE(probe_refusal({10000, 1000, 30000, 64, 4}), "");  // 310 s
  EXPECT_EQ(bulk_refusal(1u << 20), "");
  EXPECT_EQ(bulk_refusal(Limits::kMaxBulkBytes), "");
  EXPECT_NE(bulk_refusal(Limits::kMaxBulkBytes + 1), "");
  EXPECT_NE(bulk_refusal(0), "");
}

}  // namespace
}  // namespace phub::probe

// Tests of whole session packets (session_packet.hpp): what a sealed packet carries, that it opens once in
// the other side's window and never twice, and that each kind of tampering gets its own verdict.
#include <gtest/gtest.h>

#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_packet.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

SessionKeys keys_for(uint8_t server_nonce_byte = 0x5a) {
  SessionContext c;
  c.rank = 7;
  c.incarnation = 42;
  c.lcore_index = 1;
  c.worker_nonce.fill(std::byte{1});
  c.server_nonce.fill(std::byte{server_nonce_byte});
  return derive_session_keys(derive_key("a-job-secret-of-24-bytes", 0x01020304), c);
}

constexpr ReplyAddress kReply{0xc6120065, 50003};  // 198.18.0.101:50003

// A push of 8 fp32 elements, its header written with the crc flag set (sealing with a MAC must clear it).
std::vector<std::byte> push_message(uint16_t flags = 0) {
  Header h = test::sample_header(8);
  h.flags = flags;
  h.payload_bytes = 32;
  std::vector<std::byte> msg(kHeaderBytes + 32);
  for (size_t i = 0; i < 32; ++i) msg[kHeaderBytes + i] = static_cast<std::byte>(i * 7 + 1);
  write_header(h, std::span(msg).first<kHeaderBytes>());
  return msg;
}

TEST(SessionPacket, SealedOpensOnceAndItsReplayIsRefused) {
  const SessionKeys k = keys_for();
  auto msg = push_message();
  seal_session_packet(worker_to_server(k), msg, kReply, 5, false);
  ReplayWindow window;
  uint64_t seq = 0;
  EXPECT_EQ(open_session_packet(worker_to_server(k), window, msg, kReply, false, &seq), SessionVerdict::ok);
  EXPECT_EQ(seq, 5u);
  EXPECT_EQ(window.top(), 5u);
  EXPECT_EQ(open_session_packet(worker_to_server(k), window, msg, kReply, false), SessionVerdict::replayed);
  // The parsed header is still a valid v3 header with the number's low half in seq.
  auto h = parse_header(msg);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->seq, 5u);
  EXPECT_EQ(h->flags & flag::mac, 0);
}

TEST(SessionPacket, EachDirectionAndSessionHasItsOwnKeys) {
  const SessionKeys k = keys_for();
  auto msg = push_message();
  seal_session_packet(worker_to_server(k), msg, kReply, 1, false);
  ReplayWindow w1, w2, w3;
  // The other direction, another session (another server nonce), another reply address: all bad_tag, and
  // none of them moves its window.
  EXPECT_EQ(open_session_packet(server_to_worker(k), w1, msg, kReply, false), SessionVerdict::bad_tag);
  EXPECT_EQ(open_session_packet(worker_to_server(keys_for(0x5b)), w2, msg, kReply, false), SessionVerdict::bad_tag);
  EXPECT_EQ(open_session_packet(worker_to_server(k), w3, msg, ReplyAddress{kReply.ipv4, 50004}, false),
            SessionVerdict::bad_tag);
  EXPECT_EQ(w1.top(), 0u);
  EXPECT_EQ(w2.top(), 0u);
  EXPECT_EQ(w3.top(), 0u);
}

TEST(SessionPacket, PayloadMacTravelsInCrcAndAuxAndCatchesAnyChangedByte) {
  const SessionKeys k = keys_for();
  auto msg = push_message(flag::crc);
  seal_session_packet(worker_to_server(k), msg, kReply, 77, true);
  auto h = parse_header(msg);
  ASSERT_TRUE(h.has_value()) << static_cast<int>(h.error());
  EXPECT_EQ(h->flags & (flag::mac | flag::crc), flag::mac);
  const uint64_t mac = session_payload_mac(k.worker_mac, 77, std::span(msg).subspan(kHeaderBytes));
  EXPECT_EQ((uint64_t{h->crc32c} << 32) | h->aux, mac);
  {
    ReplayWindow w;
    EXPECT_EQ(open_session_packet(worker_to_server(k), w, msg, kReply, true), SessionVerdict::ok);
  }
  for (size_t i = kHeaderBytes; i < msg.size(); ++i) {
    auto altered = msg;
    altered[i] ^= std::byte{0x01};
    ReplayWindow w;
    EXPECT_EQ(open_session_packet(worker_to_server(k), w, altered, kReply, true), SessionVerdict::bad_mac) << i;
    EXPECT_EQ(w.top(), 0u) << "an altered packet must not move the window";
  }
}

TEST(SessionPacket, ASessionThatRequiresTheMacRefusesAPacketWithout) {
  const SessionKeys k = keys_for();
  auto msg = push_message();
  seal_session_packet(worker_to_server(k), msg, kReply, 3, false);
  ReplayWindow w;
  EXPECT_EQ(open_session_packet(worker_to_server(k), w, msg, kReply, true), SessionVerdict::mac_missing);
  EXPECT_EQ(w.top(), 0u);
  // Clearing the mac flag of a packet sealed with one breaks its tag: the flag cannot be stripped.
  auto with_mac = push_message();
  seal_session_packet(worker_to_server(k), with_mac, kReply, 4, true);
  store_be<uint16_t>(with_mac.data() + 4, 0);
  EXPECT_EQ(open_session_packet(worker_to_server(k), w, with_mac, kReply, true), SessionVerdict::bad_tag);
}

TEST(SessionPacket, TryChecksWithoutCommitting) {
  const SessionKeys k = keys_for();
  auto msg = push_message();
  seal_session_packet(worker_to_server(k), msg, kReply, 9, false);
  ReplayWindow w;
  EXPECT_EQ(try_session_packet(worker_to_server(k), w, msg, kReply, false), SessionVerdict::ok);
  EXPECT_EQ(try_session_packet(worker_to_server(k), w, msg, kReply, false), SessionVerdict::ok);
  EXPECT_EQ(w.top(), 0u);
  EXPECT_EQ(open_session_packet(worker_to_server(k), w, msg, kReply, false), SessionVerdict::ok);
  EXPECT_EQ(try_session_packet(worker_to_server(k), w, msg, kReply, false), SessionVerdict::replayed);
}

// A number behind the window's bottom is inferred as the one 2^32 later (replay_window.hpp, infer), whose
// high half the tag then refutes: far too old reads as a bad tag, and moves nothing.
TEST(SessionPacket, NumbersFarBehindTheWindowFailTheirTag) {
  const SessionKeys k = keys_for();
  ReplayWindow w;
  auto late = push_message();
  seal_session_packet(worker_to_server(k), late, kReply, 10, false);
  auto ahead = push_message();
  seal_session_packet(worker_to_server(k), ahead, kReply, 10 + ReplayWindow::kSpan + 5, false);
  EXPECT_EQ(open_session_packet(worker_to_server(k), w, ahead, kReply, false), SessionVerdict::ok);
  uint64_t seq = 0;
  EXPECT_EQ(open_session_packet(worker_to_server(k), w, late, kReply, false, &seq), SessionVerdict::bad_tag);
  EXPECT_EQ(seq, 10u + (uint64_t{1} << 32));
  EXPECT_EQ(w.top(), 10u + ReplayWindow::kSpan + 5);
}

TEST(SessionPacket, OnlyWorkerAndServerElementsCarryThePayloadMac) {
  EXPECT_TRUE(session_opcode_has_mac(Opcode::push));
  EXPECT_TRUE(session_opcode_has_mac(Opcode::init));
  EXPECT_TRUE(session_opcode_has_mac(Opcode::result));
  for (Opcode op : {Opcode::pull, Opcode::rerequest, Opcode::leave, Opcode::join, Opcode::joined, Opcode::error,
                    Opcode::fwd_partial, Opcode::fwd_result, Opcode::fwd_init, Opcode::hub_state}) {
    EXPECT_FALSE(session_opcode_has_mac(op)) << opcode_name(op);
  }
}

TEST(SessionPacket, VerdictsHaveNames) {
  for (size_t v = 0; v < kSessionVerdicts; ++v) {
    EXPECT_NE(session_verdict_name(static_cast<SessionVerdict>(v)), "?") << v;
  }
}

}  // namespace
}  // namespace phub::proto

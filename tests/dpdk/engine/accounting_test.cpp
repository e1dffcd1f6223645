// Every frame is accounted for: each lcore's received frames (from its queues and handed over by other lcores)
// equal those it accepted, those it dropped for a named reason or as malformed, and those it handed off; none
// ends unaccounted. Tried as an attacker on the segment would: a flood of mutated copies of recorded frames.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "harness.hpp"
#include "phub/proto/arp_icmp.hpp"

namespace phub::test {
namespace {

// One round of every rank's pushes of job j.
void push_round(StartedEngine& s, size_t j) {
  const auto& job = s.cfg.jobs[j];
  const auto& l = s.layout(j);
  for (uint32_t c = 0; c < l.chunk_count(); ++c) {
    for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg) {
      for (uint16_t r = 0; r < job.workers; ++r) {
        std::vector<float> v(l.segment_count_elems(l.chunk(c), seg));
        for (uint32_t i = 0; i < v.size(); ++i) v[i] = gradient(r, 0, c, l.segment_offset(seg) + i);
        s.workers->send(job, r, push_header(l, c, seg, 0, r, job.dtype), encode(v, job.dtype));
      }
    }
  }
}

// A copy of `f` changed as an attacker would try it: bytes flipped anywhere, or in the phub header or payload
// with the UDP checksum made right again, cut short, padded, or replayed as it was.
std::vector<std::byte> mutate(std::vector<std::byte> f, std::mt19937& rng) {
  constexpr size_t kPhub = proto::kEthBytes + proto::kIpv4Bytes + proto::kUdpBytes;
  auto any = [&](size_t from, size_t to) { return from + rng() % std::max<size_t>(1, to - from); };
  auto flip = [&](size_t from, size_t to, int times) {
    for (int i = 0; i < times && from < to; ++i) f[any(from, to)] ^= static_cast<std::byte>(1 + rng() % 255);
  };
  switch (rng() % 7) {
    case 0: flip(0, f.size(), 1 + static_cast<int>(rng() % 4)); break;
    case 1:
      flip(kPhub, std::min(f.size(), kPhub + proto::kHeaderBytes), 1 + static_cast<int>(rng() % 3));
      if (f.size() > kPhub) proto::refresh_udp_checksum(f);
      break;
    case 2:
      flip(kPhub + proto::kHeaderBytes, f.size(), 1 + static_cast<int>(rng() % 3));
      if (f.size() > kPhub) proto::refresh_udp_checksum(f);
      break;
    case 3: f.resize(1 + rng() % f.size()); break;
    case 4: f.resize(f.size() + 1 + rng() % 64, static_cast<std::byte>(rng())); break;
    case 5:  // the UDP checksum zeroed (none, legal for IPv4) after a change in the header
      flip(kPhub, std::min(f.size(), kPhub + proto::kHeaderBytes), 1);
      if (f.size() > kPhub) f[kPhub - 2] = f[kPhub - 1] = std::byte{0};  // the UDP header's last two bytes
      break;
    default: break;  // replayed unchanged
  }
  return f;
}

TEST(Accounting, EveryFrameOfAMutatedFloodIsAcceptedDroppedOrHandedOff) {
  auto keyed = make_job(1, 2, {3000});
  keyed.secret = "accounting-job-key-secret-0123456789";
  auto open = make_job(2, 2, {3000});
  auto sessions = make_job(3, 2, {3000});
  sessions.secret = "accounting-sessions-secret-0123456789";
  sessions.sessions = true;
  StartedEngine s(2, {keyed, open, sessions});
  for (size_t j = 0; j < 3; ++j) (void)s.layout(j);

  // The recording: an ARP request, every rank's joins (the whole handshake) and a round of pushes.
  std::vector<std::vector<std::byte>> recorded;
  s.workers->record = &recorded;
  std::array<std::byte, proto::kArpFrameBytes> arp{};
  (void)proto::build_arp_request({2, 0x77, 0, 0, 0, 9}, kServerIp + 9, kServerIp, arp);
  s.workers->send_frame({arp.begin(), arp.end()}, 0);
  for (const auto& job : s.cfg.jobs) {
    for (uint16_t r = 0; r < job.workers; ++r) s.workers->prove(job, r);
  }
  push_round(s, 0);
  push_round(s, 1);
  s.workers->record = nullptr;
  (void)s.workers->receive(1'000'000, std::chrono::milliseconds(300));
  ASSERT_GT(recorded.size(), 20u);

  auto received = [&] { return s.engine->totals().lcores.rx_packets; };
  const uint64_t before = received();
  constexpr uint64_t kFlood = 20'000;
  std::mt19937 rng(20261207);
  for (uint64_t i = 0; i < kFlood; ++i) {
    s.workers->send_frame(mutate(recorded[rng() % recorded.size()], rng), static_cast<uint16_t>(rng() % 2));
    if (i % 512 == 0) (void)s.workers->receive(1'000'000, std::chrono::milliseconds(0));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto t = s.engine->totals().lcores;
    if (received() == before + kFlood && t.redirected_in == t.redirected_out) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(received(), before + kFlood);

  uint64_t accepted = 0, dropped = 0;
  for (const auto& l : s.engine->report().lcores) {
    const auto& c = l.counters;
    SCOPED_TRACE("lcore " + std::to_string(l.lcore_id));
    EXPECT_EQ(c.unaccounted, 0u);
    EXPECT_EQ(c.rx_packets + c.redirected_in, c.accepted + c.frames_dropped + c.redirected_out);
    accepted += c.accepted;
    dropped += c.frames_dropped;
  }
  // Most of a mutated flood is refused, but replays and changes a handler tolerates are taken.
  EXPECT_GT(dropped, kFlood / 2);
  EXPECT_GT(accepted, 0u);
  std::printf("flood of %llu mutated frames: %llu accepted, %llu dropped (whole run)\n",
              static_cast<unsigned long long>(kFlood), static_cast<unsigned long long>(accepted),
              static_cast<unsigned long long>(dropped));
  if (HasFailure()) std::printf("%s", s.engine->format_counters().c_str());
}

}  // namespace
}  // namespace phub::test

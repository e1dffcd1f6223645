// Checksum offloads (issue 33, item 5) on both paths: net_tap, whose PMD verifies IPv4/UDP checksums on
// receive and fills in UDP checksums on transmit, and net_memif, which does neither. The same job gives
// bit-equal results on both; a push corrupted on the way is dropped and counted (udp_checksum_bad) on both,
// by the PMD's verdict on tap (even under udp_checksum = "trust") and by the software check on memif.
// The workers reach the tap port through its kernel interface (net_af_packet), in the network namespace
// the binary made for itself (offload_main.cpp); the memif workers are the client of the server's socket.
#include <gtest/gtest.h>

#include <rte_ethdev.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "phub/base/bytes.hpp"

namespace phub::test {
namespace {

using engine::Drop;

enum class Path { tap, memif };

constexpr size_t kUdpChecksumAt = proto::kEthBytes + proto::kIpv4Bytes + 6;

// An engine on one port of `path` and the workers on that port's peer.
struct OffloadRig {
  OffloadRig(Path path, const std::function<void(config::Config&)>& tweak = {}) {
    const std::string tag = std::to_string(getpid());
    std::string server, worker;
    if (path == Path::tap) {
      server = "net_tap_off0,iface=phuboff0";
      worker = "net_af_packet_off0,iface=phuboff0,qpairs=1";
    } else {
      // An abstract socket (net_memif's default), a new name for each rig: the PMD keeps listening on a
      // name after its port is closed.
      static int rigs = 0;
      const std::string sock = "/tmp/phub-test-offload-" + tag + "-" + std::to_string(rigs++) + ".sock";
      server = "net_memif_offs0,role=server,socket=" + sock;
      worker = "net_memif_offw0,role=client,socket=" + sock;
    }
    server_name = server.substr(0, server.find(','));
    cfg = make_config(server, 1, {make_job(1, 2, {3000})});
    if (tweak) tweak(cfg);
    engine = start_engine(cfg);
    workers = std::make_unique<Workers>(worker, 1, *engine);
  }
  ~OffloadRig() {
    engine->stop();
    workers.reset();
    // With both ends of a memif link in this process, the EAL's interrupt thread handles the client's
    // disconnect on the server's device (net_memif's memif_disconnect) after the client closed; closing the
    // server while it does crashed the process (about 2 runs in 5). The link goes down as that handling
    // begins: wait for it, then give the rest of it time.
    uint16_t id = 0;
    if (rte_eth_dev_get_port_by_name(server_name.c_str(), &id) == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      rte_eth_link link{};
      while (rte_eth_link_get_nowait(id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    engine.reset();
  }
  [[nodiscard]] std::string port_line() const {
    for (const auto& l : engine->startup_lines()) {
      if (l.find("rx-udp-cksum") != std::string::npos) return l;
    }
    return {};
  }
  [[nodiscard]] const proto::Layout& layout() { return workers->layout(cfg.jobs[0], 1); }

  // The push of `rank` for segment `seg` of `chunk` in round 0, with its full UDP checksum.
  std::vector<std::byte> push(uint32_t chunk, uint32_t seg, uint16_t rank) {
    const auto& job = cfg.jobs[0];
    const auto& l = layout();
    std::vector<float> v(l.segment_count_elems(l.chunk(chunk), seg));
    for (uint32_t i = 0; i < v.size(); ++i) v[i] = gradient(rank, 0, chunk, l.segment_offset(seg) + i);
    const auto payload = encode(v, job.dtype);
    std::vector<std::byte> f(proto::kFrameHeadersBytes + payload.size());
    proto::Header h = push_header(l, chunk, seg, 0, rank, job.dtype);
    h.job_id = job.id;
    EXPECT_TRUE(proto::build_phub_frame(workers->addrs(rank, job.port_base), h, payload, f).has_value());
    return f;
  }

  // Waits until the engine counted `n` frames dropped as udp_checksum_bad, or a second passed.
  uint64_t checksum_drops_after_settling(uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (drops(*engine, Drop::udp_checksum_bad) < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return drops(*engine, Drop::udp_checksum_bad);
  }

  std::string server_name;  // the server port's ethdev name
  config::Config cfg;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Workers> workers;
};

// A frame whose payload changed on the way: one bit of its first element, the UDP checksum as it was.
std::vector<std::byte> corrupted(std::vector<std::byte> f) {
  f[proto::kFrameHeadersBytes + proto::kHeaderBytes + 1] ^= std::byte{0x40};
  return f;
}

struct RoundResult {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::byte>> results;  // (chunk, elem offset) -> payload
  std::string port_line;
};

// One round of the job on `path`: first a corrupted push (dropped and counted), then every push, rank 1's
// with no UDP checksum (a 0 field, accepted). Every result is checked against the exact sum and for the UDP
// checksum it carries: filled in by the PMD where it offloads it, 0 where it does not.
RoundResult run_round(Path path) {
  OffloadRig rig(path);
  RoundResult out;
  out.port_line = rig.port_line();
  const auto& l = rig.layout();
  rig.workers->send_frame(corrupted(rig.push(0, 0, 0)), 0);
  EXPECT_EQ(rig.checksum_drops_after_settling(1), 1u);
  EXPECT_EQ(job_counters(*rig.engine, 0).pushes, 0u);

  size_t segments = 0;
  for (uint32_t c = 0; c < l.chunk_count(); ++c) {
    for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg, ++segments) {
      rig.workers->send_frame(rig.push(c, seg, 0), 0);
      auto none = rig.push(c, seg, 1);
      store_be<uint16_t>(none.data() + kUdpChecksumAt, 0);
      rig.workers->send_frame(none, 0);
    }
  }
  const auto got = rig.workers->receive(2 * segments);
  EXPECT_EQ(got.size(), 2 * segments);
  const bool tx_offload = rig.engine->snapshot().ports[0].tx_udp_checksum_offload;
  for (const auto& r : got) {
    EXPECT_EQ(r.hdr.opcode, proto::Opcode::result);
    if (tx_offload) {
      EXPECT_NE(r.udp_checksum, 0u) << "a result without the checksum the PMD offloads";
    } else {
      EXPECT_EQ(r.udp_checksum, 0u) << "a result with a UDP checksum on a port that does not offload it";
    }
    EXPECT_TRUE(r.udp_checksum_ok);
    const auto values = decode(r.payload, rig.cfg.jobs[0].dtype);
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < values.size(); ++i) {
      const float sum = gradient(0, 0, r.hdr.chunk_id, r.hdr.elem_offset + i) +
                        gradient(1, 0, r.hdr.chunk_id, r.hdr.elem_offset + i);
      wrong += values[i] != sum ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "wrong sums in chunk " << r.hdr.chunk_id << " from elem " << r.hdr.elem_offset;
    auto [it, fresh] = out.results.try_emplace({r.hdr.chunk_id, r.hdr.elem_offset}, r.payload);
    if (!fresh) {
      EXPECT_EQ(it->second, r.payload) << "two ranks got different results";
    }
  }
  EXPECT_EQ(out.results.size(), segments);
  EXPECT_EQ(job_counters(*rig.engine, 0).pushes, 2 * segments);
  EXPECT_EQ(drops(*rig.engine, Drop::udp_checksum_bad), 1u);
  return out;
}

// Under udp_checksum = "trust" no checksum is checked in software: a corrupted push is still dropped on tap,
// by the PMD's verdict (BAD). (The same push on a port without the offload is summed as it came: net_ring's
// Engine.UdpChecksumTrustSkipsTheSoftwareCheck.) Before the memif rig: with both ends of a memif link in this
// process, opening a port after they closed crashed it in 1 run in 3 (SIGSEGV in the EAL's interrupt thread,
// called from net_memif), so the one memif rig of the binary comes last.
TEST(Offloads, ThePmdsVerdictHoldsWhereSoftwareTrusts) {
  OffloadRig rig(Path::tap, [](config::Config& c) { c.ports[0].udp_checksum = config::UdpChecksum::trust; });
  rig.workers->send_frame(corrupted(rig.push(0, 0, 0)), 0);
  rig.workers->send_frame(rig.push(0, 0, 1), 0);
  EXPECT_EQ(rig.checksum_drops_after_settling(1), 1u);
  EXPECT_TRUE(rig.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(job_counters(*rig.engine, 0).pushes, 1u);
}

TEST(Offloads, TapAndMemifGiveBitEqualResultsAndCountACorruptedPush) {
  const RoundResult tap = run_round(Path::tap);
  const RoundResult memif = run_round(Path::memif);
  // What DPDK 22.11's net_tap reports and phub takes; net_memif reports none.
  EXPECT_NE(tap.port_line.find("rx-ipv4-cksum hw, rx-udp-cksum hw, tx-udp-cksum hw"), std::string::npos)
      << tap.port_line;
  EXPECT_NE(memif.port_line.find("rx-ipv4-cksum sw, rx-udp-cksum sw, tx-udp-cksum off"), std::string::npos)
      << memif.port_line;
  EXPECT_NE(tap.port_line.find("fast-free no"), std::string::npos) << tap.port_line;
  ASSERT_FALSE(tap.results.empty());
  EXPECT_EQ(tap.results, memif.results);
}

}  // namespace
}  // namespace phub::test

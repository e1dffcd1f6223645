// phub-bench-defences: what each per-packet defence of the receive path costs (docs/security.md), against
// the work the server does for the same packet anyway: summing its segment (352 fp32) into the running sum
// with the selected agg kernel. RESULT lines (lower is better: the metric names say "_vs_sum") and a JSON
// file.
#include <sodium.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../agg/timing.hpp"
#include "phub/agg/kernels.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::bench {
namespace {

constexpr uint32_t kElems = 352;  // one fp32 segment at MTU 1500

struct Options {
  std::string json_path = "build/bench/defences.json";
  int rounds = 301;
  double batch_ns = 5e5;
};

struct Row {
  std::string metric;
  std::string what;
  agg::bench::Race race;
};

volatile uint64_t g_sink;  // keeps results alive

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      o->json_path = argv[++i];
    } else if (arg == "--quick") {
      o->rounds = 21;
      o->batch_ns = 2e5;
    } else {
      std::fprintf(stderr, "usage: phub-bench-defences [--json PATH] [--quick]\n");
      return false;
    }
  }
  return true;
}

bool write_json(const Options& o, const std::vector<Row>& rows) {
  const std::filesystem::path path(o.json_path);
  std::error_code ignored;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ignored);
  std::FILE* f = std::fopen(o.json_path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "phub-bench-defences: cannot write %s\n", o.json_path.c_str());
    return false;
  }
  std::fprintf(f, "{\n  \"name\": \"defences\",\n  \"segment_elems\": %u,\n  \"rounds\": %d,\n  \"results\": [\n",
               kElems, o.rounds);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f, "    {\"metric\": \"%s\", \"what\": \"%s\", \"ns_per_packet\": %.2f, \"sum_ns\": %.2f}%s\n",
                 r.metric.c_str(), r.what.c_str(), r.race.target_ns, r.race.limit_ns, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  return std::fclose(f) == 0;
}

int run(const Options& o) {
  const agg::Kernels& k = agg::select_kernels();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0F, 1.0F);
  std::vector<float> values(kElems);
  for (float& v : values) v = u(rng);

  // One push as it arrives: a frame with the phub header and the segment, checksummed and signed.
  proto::Header h;
  h.opcode = proto::Opcode::push;
  h.job_id = 7;
  h.rank = 3;
  h.elem_count = kElems;
  h.flags = proto::flag::crc;
  proto::FlowAddrs a;
  a.src_ip = 0xc6120065;
  a.dst_ip = 0xc6120001;
  a.src_port = 50003;
  a.dst_port = 40000;
  const auto payload = std::as_bytes(std::span(values));
  std::vector<std::byte> frame(proto::kFrameHeadersBytes + payload.size());
  if (!proto::build_phub_frame(a, h, payload, frame)) return 1;
  const proto::AuthKey job_key = proto::derive_key("a-job-secret-of-24-bytes", 1);
  const proto::AuthKey cookie_key{0x1234, 0x5678};
  auto wire = std::span(frame).subspan(proto::kFrameHeadersBytes - proto::kHeaderBytes).first<proto::kHeaderBytes>();
  proto::sign_header(job_key, wire);
  proto::refresh_udp_checksum(frame);
  auto l2 = proto::parse_l2(frame);
  if (!l2) return 1;
  auto ip = proto::parse_ipv4(frame, *l2);
  if (!ip) return 1;
  const std::byte* seg = frame.data() + proto::kFrameHeadersBytes;
  std::vector<float> sum(kElems, 0.0F);
  auto summing = [&] { k.accumulate(sum.data(), seg, Dtype::fp32, kElems); };

  std::vector<Row> rows;
  auto measure = [&](const char* metric, const char* what, auto&& fn) {
    rows.push_back({metric, what, agg::bench::race(o.rounds, o.batch_ns, fn, summing)});
  };
  measure("tag_verify_vs_sum", "SipHash-2-4 tag of the 54-byte header (jobs with a secret)",
          [&] { g_sink = g_sink + proto::verify_header(job_key, wire); });
  measure("address_cookie_vs_sum", "the address cookie (packets from an unproven address only)",
          [&] { g_sink = g_sink + proto::address_cookie(cookie_key, 7, 3, 0xc6120065, static_cast<uint16_t>(g_sink)); });
  measure("payload_crc32c_vs_sum", "CRC32C of the 1408-byte payload (the crc flag)",
          [&] { g_sink = g_sink + proto::crc32c(payload); });
  measure("udp_checksum_vs_sum", "the UDP checksum in software (PMD without checksum offload)",
          [&] { g_sink = g_sink + proto::udp_checksum_ok(frame, *ip); });

  // Sessions (docs/protocol.md, "Sessions"): the session tag beside the job tag above, the anti-replay
  // window, and the payload MAC candidates over the same 1408 bytes.
  proto::SessionContext session;
  session.rank = 3;
  session.incarnation = 0x1234567;
  session.worker_nonce = proto::draw_session_nonce();
  session.server_nonce = proto::draw_session_nonce();
  const proto::SessionKeys keys = proto::derive_session_keys(job_key, session);
  const proto::ReplyAddress reply{a.src_ip, a.src_port};
  const uint64_t seq = 0x100000005ull;
  std::array<std::byte, proto::kHeaderBytes> session_wire{};
  std::copy(wire.begin(), wire.end(), session_wire.begin());
  proto::seal_session(keys.worker_tag, session_wire, reply, seq);
  measure("session_tag_verify_vs_sum", "session tag: SipHash-2-4 of header, reply address, high seq half (64 bytes)",
          [&] { g_sink = g_sink + proto::verify_session(keys.worker_tag, session_wire, reply, seq); });
  proto::ReplayWindow window;
  uint64_t next_seq = 1;
  measure("replay_window_vs_sum", "anti-replay window: infer, check, commit of an in-order number",
          [&] {
            const uint64_t s = window.infer(proto::seq_low(next_seq++));
            g_sink = g_sink + static_cast<uint64_t>(window.check(s)) + static_cast<uint64_t>(window.commit(s));
          });
  // Each payload MAC over the whole payload and over its first 64 bytes: the difference over the 1344 bytes
  // between is the cost per byte, the rest the fixed cost per packet.
  std::array<unsigned char, crypto_aead_chacha20poly1305_ietf_KEYBYTES> other_key{};
  randombytes_buf(other_key.data(), other_key.size());
  std::array<unsigned char, crypto_aead_chacha20poly1305_ietf_NPUBBYTES> nonce{};
  auto siphash_mac = [&](std::span<const std::byte> p) {
    g_sink = g_sink + proto::session_payload_mac(keys.worker_mac, seq, p);
  };
  auto poly1305_mac = [&](std::span<const std::byte> p) {
    unsigned char tag[crypto_aead_chacha20poly1305_ietf_ABYTES];
    unsigned long long tag_bytes = 0;
    unsigned char no_ciphertext[1];  // nothing is encrypted; libsodium wants a buffer anyway
    nonce[11] = static_cast<unsigned char>(g_sink);  // a fresh nonce per packet, as seq would give
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(no_ciphertext, tag, &tag_bytes, nullptr, 0,
                                                       reinterpret_cast<const unsigned char*>(p.data()), p.size(),
                                                       nullptr, nonce.data(), other_key.data());
    g_sink = g_sink + tag[0];
  };
  auto blake2b_mac = [&](std::span<const std::byte> p) {
    unsigned char tag[16];
    crypto_generichash(tag, sizeof tag, reinterpret_cast<const unsigned char*>(p.data()), p.size(), other_key.data(),
                       16);
    g_sink = g_sink + tag[0];
  };
  constexpr size_t kShortBytes = 64;
  const auto short_payload = payload.first(kShortBytes);
  measure("payload_mac_siphash_vs_sum", "payload MAC, SipHash-2-4 of seq and the 1408 bytes (the one built)",
          [&] { siphash_mac(payload); });
  measure("payload_mac_siphash_64B_vs_sum", "the same over 64 bytes", [&] { siphash_mac(short_payload); });
  measure("payload_mac_poly1305_vs_sum", "payload MAC, ChaCha20-Poly1305 (IETF) with the 1408 bytes as associated data",
          [&] { poly1305_mac(payload); });
  measure("payload_mac_poly1305_64B_vs_sum", "the same over 64 bytes", [&] { poly1305_mac(short_payload); });
  measure("payload_mac_blake2b_vs_sum", "payload MAC, keyed BLAKE2b-128 of the 1408 bytes", [&] { blake2b_mac(payload); });
  measure("payload_mac_blake2b_64B_vs_sum", "the same over 64 bytes", [&] { blake2b_mac(short_payload); });

  std::printf("defences: per packet of %u fp32 elements (%zu-byte frame), against summing it (%s kernels)\n", kElems,
              frame.size(), k.name);
  for (const Row& r : rows) {
    std::printf("RESULT defences %s=%.1fns limit=%.1fns ratio=%.3f   # %s\n", r.metric.c_str(), r.race.target_ns,
                r.race.limit_ns, r.race.target_ns / r.race.limit_ns, r.what.c_str());
  }
  // Per byte and fixed per packet, from each MAC's pair of rows.
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    const Row& whole = rows[i];
    const Row& part = rows[i + 1];
    if (!whole.metric.starts_with("payload_mac_") || part.metric.find("_64B_") == std::string::npos) continue;
    const double per_byte = (whole.race.target_ns - part.race.target_ns) / double(payload.size() - kShortBytes);
    const std::string name = whole.metric.substr(0, whole.metric.size() - std::string("_vs_sum").size());
    std::printf("RESULT defences %s_per_byte=%.3fns %s_fixed=%.1fns\n", name.c_str(), per_byte, name.c_str(),
                part.race.target_ns - per_byte * kShortBytes);
  }
  return write_json(o, rows) ? 0 : 1;
}

}  // namespace
}  // namespace phub::bench

int main(int argc, char** argv) {
  phub::bench::Options o;
  if (!phub::bench::parse(argc, argv, &o)) return 2;
  return phub::bench::run(o);
}

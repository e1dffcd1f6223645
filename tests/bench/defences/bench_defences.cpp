// phub-bench-defences: what each per-packet defence of the receive path costs (docs/security.md), against
// the work the server does for the same packet anyway: summing its segment (352 fp32) into the running sum
// with the selected agg kernel. RESULT lines (lower is better: the metric names say "_vs_sum") and a JSON
// file.
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

  std::printf("defences: per packet of %u fp32 elements (%zu-byte frame), against summing it (%s kernels)\n", kElems,
              frame.size(), k.name);
  for (const Row& r : rows) {
    std::printf("RESULT defences %s=%.1fns limit=%.1fns ratio=%.3f   # %s\n", r.metric.c_str(), r.race.target_ns,
                r.race.limit_ns, r.race.target_ns / r.race.limit_ns, r.what.c_str());
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

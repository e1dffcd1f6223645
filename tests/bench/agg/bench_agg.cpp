// phub-bench-agg: kernel throughput against a streaming read of the same bytes, RESULT lines and a JSON file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "stream_read.hpp"
#include "timing.hpp"

namespace phub::agg::bench {
namespace {

constexpr size_t kChunkBytes = 32 * 1024;  // PHub's chunk size
constexpr size_t kContributions = 8;

struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], FreeDeleter>;

AlignedBytes aligned_bytes(size_t bytes) {
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (p == nullptr) {
    std::fprintf(stderr, "phub-bench-agg: out of memory\n");
    std::exit(1);
  }
  std::memset(p, 0, bytes);
  return AlignedBytes(p);
}

// `count` chunks of random values of moderate magnitude stored as `d`, back to back in one allocation: the
// layout in which the sequential read limit is fastest (its prefetching runs on from one chunk into the next).
AlignedBytes random_chunks(const Kernels& k, Dtype d, size_t count, std::mt19937& rng) {
  const size_t elems = count * kChunkBytes / dtype_bytes(d);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> values(elems);
  for (float& v : values) v = normal(rng);
  AlignedBytes out = aligned_bytes(count * kChunkBytes);
  k.narrow(out.get(), values.data(), d, elems);
  return out;
}

struct Result {
  std::string metric;
  std::string counted;  // which bytes the figure counts
  double bytes_per_call;
  Race race;
  [[nodiscard]] double gbps() const { return bytes_per_call / race.target_ns; }  // bytes per ns = GB/s
  [[nodiscard]] double limit_gbps() const { return bytes_per_call / race.limit_ns; }
  [[nodiscard]] double ratio() const { return race.limit_ns / race.target_ns; }
};

struct Options {
  std::string json_path = "build/bench/agg.json";
  int rounds = 301;
  double batch_ns = 5e5;  // 0.5 ms: shorter than a scheduler slice, so many batches run unpreempted
};

// The limit always uses the widest loads the CPU has, whatever kernels PHUB_ISA picks.
StreamReadFn widest_read(const char** name) {
  *name = isa_supported(Isa::avx512) ? "avx512" : isa_supported(Isa::avx2) ? "avx2" : "base";
  if (isa_supported(Isa::avx512)) return stream_read_avx512;
  return isa_supported(Isa::avx2) ? stream_read_avx2 : stream_read_base;
}

volatile uint64_t g_sink;  // keeps the reads alive

// Target against a read of `bufs` (each `bytes` long): buffer after buffer, and for distinct buffers also in
// lockstep (the tall pattern); the faster one is the limit. Repeated buffers are only read in sequence, so the
// repeat comes from L2 like the first read, not from L1 a few loads later.
template <class Target>
Race race_against_read(const Options& o, StreamReadFn read, const std::vector<const std::byte*>& bufs, size_t bytes,
                       bool distinct, Target&& target) {
  auto sequential = [&] { g_sink = read(bufs.data(), bufs.size(), bytes, true); };
  auto lockstep = [&] { g_sink = read(bufs.data(), bufs.size(), bytes, false); };
  return distinct ? race(o.rounds, o.batch_ns, target, sequential, lockstep)
                  : race(o.rounds, o.batch_ns, target, sequential);
}

Result tall_metric(const Options& o, const Kernels& k, StreamReadFn read, Dtype d, std::mt19937& rng) {
  const size_t elems = kChunkBytes / dtype_bytes(d);
  const AlignedBytes inputs = random_chunks(k, d, kContributions, rng);
  std::vector<const std::byte*> srcs;
  for (size_t j = 0; j < kContributions; ++j) srcs.push_back(inputs.get() + j * kChunkBytes);
  AlignedBytes acc = aligned_bytes(elems * sizeof(float));
  auto* dst = reinterpret_cast<float*>(acc.get());
  auto tall = [&] { k.tall(dst, srcs.data(), srcs.size(), d, elems, true); };
  return {std::string(dtype_name(d)) + "_tall_k8_32k",
          "input bytes summed: 8 contributions x 32 KB, into a fresh fp32 accumulator (init)",
          double(kContributions * kChunkBytes), race_against_read(o, read, srcs, kChunkBytes, true, tall)};
}

// Adam over one 32 KB fp32 chunk. Counted: every byte it touches, reads of w, m, v, g and writes of w, m, v
// (7 x 32 KB). The limit reads the same number of bytes: w, m, v, g and then w, m, v again.
Result adam_metric(const Options& o, const Kernels& k, StreamReadFn read, std::mt19937& rng) {
  const size_t elems = kChunkBytes / sizeof(float);
  const AlignedBytes arrays = random_chunks(k, Dtype::fp32, 4, rng);
  auto* w = reinterpret_cast<float*>(arrays.get());
  float* m = w + elems;
  float* v = m + elems;
  const float* g = v + elems;
  for (size_t i = 0; i < elems; ++i) v[i] = v[i] * v[i];  // exp_avg_sq >= 0
  const OptimizerParams p{.kind = OptimizerKind::adam, .lr = 1e-4F, .weight_decay = 0.01F, .step = 10};
  auto adam = [&] { k.optimize(p, w, m, v, g, elems); };
  std::vector<const std::byte*> reads;
  for (const size_t a : {0, 1, 2, 3, 0, 1, 2}) reads.push_back(arrays.get() + a * kChunkBytes);
  return {"adam_fused", "bytes touched: reads of w, m, v, g + writes of w, m, v (28 B/element, 32 KB chunk)",
          double(7 * kChunkBytes), race_against_read(o, read, reads, kChunkBytes, false, adam)};
}

void write_json(const Options& o, const Kernels& k, const char* read_isa, const std::vector<Result>& results) {
  const std::filesystem::path path(o.json_path);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::FILE* f = std::fopen(o.json_path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "phub-bench-agg: cannot write %s\n", o.json_path.c_str());
    return;
  }
  std::fprintf(f, "{\n  \"name\": \"agg\",\n  \"isa\": \"%s\",\n  \"selection\": \"%s\",\n", k.name,
               describe_selection().c_str());
  std::fprintf(f, "  \"limit_read_isa\": \"%s\",\n  \"rounds\": %d,\n  \"results\": [\n", read_isa, o.rounds);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"metric\": \"%s\", \"value\": %.3f, \"unit\": \"GB/s\", \"limit\": %.3f, \"ratio\": %.4f, "
                 "\"bytes_per_call\": %.0f, \"target_ns_per_call\": %.1f, \"limit_ns_per_call\": %.1f, "
                 "\"counted\": \"%s\"}%s\n",
                 r.metric.c_str(), r.gbps(), r.limit_gbps(), r.ratio(), r.bytes_per_call, r.race.target_ns,
                 r.race.limit_ns, r.counted.c_str(), i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      o->json_path = argv[++i];
    } else if (arg == "--quick") {
      o->rounds = 5;
    } else if (arg == "--rounds" && i + 1 < argc) {
      o->rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: phub-bench-agg [--json PATH] [--rounds N] [--quick]\n");
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace phub::agg::bench

int main(int argc, char** argv) {
  using namespace phub::agg;
  using namespace phub::agg::bench;
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  const Kernels& k = select_kernels();
  const char* read_isa = nullptr;
  const StreamReadFn read = widest_read(&read_isa);
  std::printf("agg isa=%s limit_read=%s: %s\n", k.name, read_isa, describe_selection().c_str());
  std::mt19937 rng(42);
  const std::vector<Result> results = {tall_metric(o, k, read, phub::Dtype::fp32, rng),
                                       tall_metric(o, k, read, phub::Dtype::bf16, rng), adam_metric(o, k, read, rng)};
  for (const Result& r : results) {
    std::printf("RESULT agg %s=%.1fGB/s limit=%.1fGB/s ratio=%.2f\n", r.metric.c_str(), r.gbps(), r.limit_gbps(),
                r.ratio());
  }
  write_json(o, k, read_isa, results);
  return 0;
}

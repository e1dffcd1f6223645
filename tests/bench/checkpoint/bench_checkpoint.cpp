// phub-bench-checkpoint: what writing a parameter-server checkpoint costs the control thread, against igzip
// alone on the same bytes (issue 17, "Cost"). The state is an Adam job's three arrays (weights, first and
// second moments) of --params fp32 each, with values spread like trained ones. The target is
// persist::write_checkpoint into --dir: 1 MiB blocks compressed with igzip level 1, a CRC32C per block, the
// header and trailer, the file's SipHash MAC, writes streamed to the disk, fsync, rename and the directory's
// fsync, as the server does. The limit is
// igzip's stateless deflate at the same level over the same 1 MiB blocks into memory, nothing else. Both run
// alternately, best of --reps each. RESULT line: the write's throughput against igzip's (higher is better).
#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "phub/persist/checkpoint.hpp"

namespace phub::bench {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;  // the writer's block (lib/persist/src/format.hpp)

struct Options {
  uint64_t params = 100'000'000;
  int reps = 3;
  std::string dir = "build/bench/checkpoint";
  std::string json_path = "build/bench/checkpoint.json";
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--params" && has_value) {
      o->params = std::stoull(argv[++i]);
    } else if (arg == "--reps" && has_value) {
      o->reps = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--dir" && has_value) {
      o->dir = argv[++i];
    } else if (arg == "--json" && has_value) {
      o->json_path = argv[++i];
    } else if (arg == "--quick") {
      o->params = 2'000'000;
      o->reps = 2;
    } else {
      std::fprintf(stderr, "usage: phub-bench-checkpoint [--params N] [--reps N] [--dir DIR] [--json PATH] [--quick]\n");
      return false;
    }
  }
  return o->params > 0;
}

// Weights ~ N(0, 0.05), first moments ~ N(0, 1e-3), second moments |N(0, 1e-6)|: random mantissas, as
// trained state has, so igzip finds little to squeeze (the measured file is 0.9x the raw bytes or more).
std::vector<std::vector<float>> adam_state(uint64_t params) {
  std::mt19937_64 rng(20261201);
  const double scales[3] = {0.05, 1e-3, 1e-6};
  std::vector<std::vector<float>> arrays(3, std::vector<float>(params));
  for (int a = 0; a < 3; ++a) {
    std::normal_distribution<float> d(0.0f, static_cast<float>(scales[a]));
    for (float& x : arrays[a]) x = a == 2 ? std::fabs(d(rng)) : d(rng);
  }
  return arrays;
}

// igzip alone: every array in 1 MiB blocks, level 1, stateless, into one reused buffer. Returns the bytes out.
uint64_t igzip_only(const std::vector<std::vector<float>>& arrays, std::vector<uint8_t>& level_buf,
                    std::vector<uint8_t>& out) {
  uint64_t total = 0;
  for (const auto& a : arrays) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(a.data());
    const size_t n = a.size() * sizeof(float);
    for (size_t off = 0; off < n; off += kBlockBytes) {
      isal_zstream s;
      isal_deflate_stateless_init(&s);
      s.level = 1;
      s.level_buf = level_buf.data();
      s.level_buf_size = static_cast<uint32_t>(level_buf.size());
      s.end_of_stream = 1;
      s.flush = NO_FLUSH;
      s.next_in = const_cast<uint8_t*>(bytes + off);  // igzip does not write its input
      s.avail_in = static_cast<uint32_t>(std::min(kBlockBytes, n - off));
      s.next_out = out.data();
      s.avail_out = static_cast<uint32_t>(out.size());
      if (isal_deflate_stateless(&s) != COMP_OK) s.total_out = s.avail_in;  // stored raw, as the writer would
      total += s.total_out;
    }
  }
  return total;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Options& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) {
    std::fprintf(stderr, "phub-bench-checkpoint: cannot create %s: %s\n", o.dir.c_str(), ec.message().c_str());
    return 1;
  }
  const auto arrays = adam_state(o.params);
  const double raw_bytes = 3.0 * static_cast<double>(o.params) * sizeof(float);
  std::vector<std::span<const float>> views(arrays.begin(), arrays.end());
  persist::CheckpointMeta meta;
  meta.id = {"bench-adam", 1, 0, 0x1234};
  meta.elems = o.params;
  meta.step = 1;

  std::vector<uint8_t> level_buf(ISAL_DEF_LVL1_DEFAULT), out(kBlockBytes + kBlockBytes / 8 + 1024);
  double best_write_s = 1e300, best_igzip_s = 1e300;
  uint64_t file_bytes = 0, igzip_bytes = 0;
  for (int r = 0; r < o.reps; ++r) {
    for (int side = 0; side < 2; ++side) {
      const bool write_first = r % 2 == 0;
      const auto t0 = std::chrono::steady_clock::now();
      if ((side == 0) == write_first) {
        meta.round = static_cast<uint32_t>(r + 1);
        auto path = persist::write_checkpoint(o.dir, meta, views, persist::checkpoint_key("bench secret", meta.id.job_id));
        const double s = seconds_since(t0);
        if (!path.has_value()) {
          std::fprintf(stderr, "phub-bench-checkpoint: write failed: %s\n", path.error().c_str());
          return 1;
        }
        file_bytes = std::filesystem::file_size(*path);
        std::filesystem::remove(*path, ec);
        best_write_s = std::min(best_write_s, s);
      } else {
        igzip_bytes = igzip_only(arrays, level_buf, out);
        best_igzip_s = std::min(best_igzip_s, seconds_since(t0));
      }
    }
  }
  const double write_gbs = raw_bytes / best_write_s / 1e9, igzip_gbs = raw_bytes / best_igzip_s / 1e9;
  std::printf("checkpoint: Adam job of %llu parameters (%.2f GB of state), %d reps, file %.3f of raw, igzip %.3f\n",
              static_cast<unsigned long long>(o.params), raw_bytes / 1e9, o.reps, file_bytes / raw_bytes,
              igzip_bytes / raw_bytes);
  std::printf("RESULT checkpoint write_gbs=%.3f limit=igzip_gbs=%.3f ratio=%.3f   # file written (compress, CRC32C, "
              "MAC, fsync, rename) against igzip alone on the same bytes\n",
              write_gbs, igzip_gbs, write_gbs / igzip_gbs);
  if (std::FILE* f = std::fopen(o.json_path.c_str(), "w")) {
    std::fprintf(f,
                 "{\"name\": \"checkpoint\", \"params\": %llu, \"reps\": %d, \"write_s\": %.4f, \"igzip_s\": %.4f, "
                 "\"write_gbs\": %.4f, \"igzip_gbs\": %.4f, \"ratio\": %.4f, \"file_bytes\": %llu}\n",
                 static_cast<unsigned long long>(o.params), o.reps, best_write_s, best_igzip_s, write_gbs, igzip_gbs,
                 write_gbs / igzip_gbs, static_cast<unsigned long long>(file_bytes));
    std::fclose(f);
  }
  return 0;
}

}  // namespace
}  // namespace phub::bench

int main(int argc, char** argv) {
  phub::bench::Options o;
  bool ok = false;
  try {
    ok = phub::bench::parse(argc, argv, &o);
  } catch (const std::exception&) {  // a number that is not one (std::stoull, std::stoi)
    std::fprintf(stderr, "phub-bench-checkpoint: a numeric argument is not a number\n");
  }
  if (!ok) return 2;
  return phub::bench::run(o);
}

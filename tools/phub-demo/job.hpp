// Command line of phub-demo-worker and the job it plays, read from a phub Lua config (embedded default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/expected.hpp"
#include "phub/client.h"
#include "phub/config/config.hpp"

namespace phub::demo {

struct Args {
  std::string config_path;  // empty: the embedded default config
  std::string job;          // name or id
  int rank = -1;
  std::string server;       // empty: the config's first port address
  std::optional<std::string> secret;  // overrides the job's: from --secret-file or PHUB_SECRET, never argv
  std::string secret_file;
  uint32_t rounds = 0;
  double seconds = 0;
  uint32_t timeout_ms = 10000;
  uint32_t window = 0;
  int delay_target_us = -1;  // -1: the library's default
  uint32_t rto_min_us = 0;  // 0: the library's default
  uint32_t drop_ppm = 0, rx_drop_ppm = 0, dup_ppm = 0, reorder_ppm = 0;
  uint64_t seed = 0;
  bool no_gso = false, no_gro = false, crc = false, sync = false;
  bool fresh_weights = false;  // rank 0 of a ps job: the restart of the job forgets the server's weights
  bool one_address = false;    // every chunk to --server, whatever the job's chunk-to-interface map says
  std::string bind;
  uint32_t bind_port = 0;  // 0: any
  std::string round_times;  // allreduce: a file to write each round's start and end (CLOCK_MONOTONIC ns) to
  bool help = false;        // --help: print usage() and exit
};

[[nodiscard]] Expected<Args, std::string> parse_args(int argc, char** argv);
[[nodiscard]] std::string usage();

struct DemoJob {
  config::Job job;
  std::string servers;
  uint16_t lcores = 1;
  uint16_t mtu = 1500;
  agg::OptimizerParams optimizer;
};

[[nodiscard]] Expected<DemoJob, std::string> load_job(const Args& a);

// The client settings for the job; the strings stay owned by `a` and `j`.
[[nodiscard]] phub_config client_config(const DemoJob& j, const Args& a);

}  // namespace phub::demo

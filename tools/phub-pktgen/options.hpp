// Command-line options of phub-pktgen: [EAL args] -- [generator args].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "settings.hpp"

namespace phub::pktgen {

struct Options {
  std::vector<std::string> eal_args;   // before "--"
  std::string server_config;           // jobs, lcores, address, MTU from the server's Lua config
  std::vector<std::string> job_texts;  // --job (instead of, or added to, the server config's jobs)
  std::vector<uint32_t> only_jobs;     // --jobs 1,3
  uint16_t server_lcores = 0;          // for --job without a server config (default 1)
  std::vector<uint16_t> owners;        // --owners 1: drive only these server lcores (empty: all)
  PortSettings port;
  uint16_t mtu = 0;
  std::string server_ip, server_mac, worker_ip;
  std::string values;                  // exact|order: override every job's values
  bool crc = false;
  bool hparams = false;
  double link_timeout_s = 10;
  RunSettings run;
  std::string scenario;                // -f
  bool json = false;                   // machine-readable summary on stdout
  std::string json_file;
  bool quiet = false;
  double linger_s = 0;                 // keep the port open after the run (see main.cpp)
  bool hold = false;                   // wait for SIGUSR1 between "pktgen: ready" and the run (see main.cpp)
  std::string write_pcap;
  uint32_t pcap_rounds = 2;
  std::string verify_pcap;
  bool help = false;
};

[[nodiscard]] Expected<Options, std::string> parse_options(int argc, char** argv);
[[nodiscard]] std::string usage();

}  // namespace phub::pktgen

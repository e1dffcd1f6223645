// Parsing phub-pktgen's command line.
#include "options.hpp"

#include <cstdlib>
#include <map>
#include <sstream>
#include <variant>

namespace phub::pktgen {
namespace {

Expected<double, std::string> number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || v < 0) return unexpected(flag + ": '" + text + "' is not a non-negative number");
  return v;
}

Expected<void, std::string> parse_inject(const std::string& text, RunSettings& s) {
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    const auto f = gen::parse_fault(item.substr(0, eq));
    if (!f) return unexpected("--inject: unknown fault '" + item.substr(0, eq) + "'");
    auto n = number("--inject", eq == std::string::npos ? "1" : item.substr(eq + 1));
    if (!n) return unexpected(n.error());
    s.inject[static_cast<size_t>(*f)] = static_cast<uint64_t>(*n);
  }
  return {};
}

}  // namespace

std::string usage() {
  return R"(usage: phub-pktgen [EAL args] -- [options]
Emulates the workers of phub jobs against a phub-server: real pushes, every result verified.
Traffic:
  --server-config FILE   take jobs, server lcores, address and MTU from the server's Lua config
  --job SPEC             a job: id=1,workers=8,keys=1000000+4096,dtype=fp32|fp16|bf16,mode=allreduce|ps,
                         reduce=sum|mean,deterministic=0|1,chunk_bytes=N,port_base=N,lcores=N,secret=S,
                         round_modulus=N,optimizer=sgd|momentum|nesterov|adam,lr=X,momentum=X,values=exact|order
  --jobs ID,ID           emulate only these jobs of the config
  --server-lcores N      server lcores for --job without a config (default 1)
  --values exact|order   override the value kind (order: only a rank-order sum matches; default for deterministic)
  --crc                  set the crc flag and the payload CRC32C on pushes
Port:
  --port DEVARGS         the generator's port: net_memif0,role=client,socket=/tmp/x.sock | net_af_packet0,iface=v0 |
                         net_tap0 | a PCI address ...
  --queues N             RX/TX queue pairs (default: one per server lcore; on memif it must match the server)
  --mtu N                IP MTU (default: the server config's, else 1500)
  --server-ip A.B.C.D    --server-mac XX:..  (else learnt by ARP)   --worker-ip A.B.C.D (first worker address)
  --mbufs N  --idle-sleep-us N (back off when idle, for shared CPUs)  --link-timeout S
  --frame-cache-mb N     pre-build the pushes of jobs with a round_modulus within N MiB (default 0: never;
                         measured slower than recycled frames, whose few frames stay in the cache)
  --recycle-frames N     where payloads are copied (--tx-copy, net_memif), send whole-segment pushes from N
                         reused frames per payload pattern and rank, only their headers rewritten (default 4,
                         0: build every push)
  --tx-copy | --tx-chain one-segment frames (payload copied; the default on net_memif) | header chained to the
                         payload template (zero copy; the default elsewhere)
Run:
  --mode closed|open     closed: each worker waits for its results; open: a fixed push rate
  --rate PPS             open loop push rate over all lcores (0: as fast as the link takes)
  --duration S           --rounds N (closed loop: rounds per worker)   --window N   --rto-ms X
  --loss F  --dup F  --reorder      drop / duplicate a fraction of own pushes, push segments in random order
  --inject KIND=N,...    bad packets: bad_tag foreign_rank unknown_job truncated lying_length bad_dtype
                         huge_count bad_opcode wrong_opcode future_round     --inject-job ID
  --drain-ms X  --settle-s X  --progress-ms N (0: none)  --seed N
  -f FILE                run a Lua scenario (see docs/pktgen.md)
Output:
  --json                 print the summary as JSON on stdout (progress stays on stderr)
  --json-file PATH       also write it there     --quiet   no progress line
  --linger S             after the run, keep the port open until SIGTERM or S seconds (prints "pktgen: done");
                         an unanswered ARP then does not restart the port: exit status 75
Traces (no EAL needed):
  --write-pcap FILE      K complete rounds of every job as a classic microsecond pcap; --pcap-rounds K
  --verify-pcap FILE     check the results a server recorded (net_pcap tx_pcap) against the expected values
Exit status: 0 all verified, 2 a mismatch or a run that did not settle or a failed scenario check, 1 an error.
)";
}

Expected<Options, std::string> parse_options(int argc, char** argv) {
  Options o;
  // Options that take a number, a word, or nothing.
  using Number = std::variant<uint16_t*, uint32_t*, uint64_t*, double*>;
  const std::map<std::string, Number> numbers = {
      {"--server-lcores", &o.server_lcores}, {"--queues", &o.port.queues}, {"--mtu", &o.mtu}, {"--mbufs", &o.port.mbufs},
      {"--idle-sleep-us", &o.port.idle_sleep_us}, {"--link-timeout", &o.link_timeout_s}, {"--rate", &o.run.rate_pps},
      {"--duration", &o.run.duration_s}, {"--rounds", &o.run.rounds}, {"--window", &o.run.window},
      {"--rto-ms", &o.run.rto_ms}, {"--loss", &o.run.loss}, {"--dup", &o.run.dup},
      {"--inject-job", &o.run.inject_job}, {"--drain-ms", &o.run.drain_ms}, {"--settle-s", &o.run.settle_s},
      {"--progress-ms", &o.run.progress_ms}, {"--seed", &o.run.seed}, {"--linger", &o.linger_s},
      {"--pcap-rounds", &o.pcap_rounds}, {"--frame-cache-mb", &o.port.frame_cache_mb},
      {"--recycle-frames", &o.port.recycle_depth}};
  const std::map<std::string, std::string*> words = {
      {"--server-config", &o.server_config}, {"--values", &o.values}, {"--port", &o.port.devargs},
      {"--server-ip", &o.server_ip}, {"--server-mac", &o.server_mac}, {"--worker-ip", &o.worker_ip},
      {"-f", &o.scenario}, {"--json-file", &o.json_file}, {"--write-pcap", &o.write_pcap},
      {"--verify-pcap", &o.verify_pcap}};
  const std::map<std::string, bool*> switches = {
      {"--help", &o.help}, {"-h", &o.help}, {"--crc", &o.crc}, {"--tx-copy", &o.port.tx_copy},
      {"--tx-chain", &o.port.tx_chain}, {"--reorder", &o.run.reorder}, {"--json", &o.json}, {"--quiet", &o.quiet}};

  int i = 1;
  bool has_sep = false;
  for (int k = 1; k < argc; ++k) has_sep = has_sep || std::string(argv[k]) == "--";
  if (has_sep) {
    for (; i < argc && std::string(argv[i]) != "--"; ++i) o.eal_args.emplace_back(argv[i]);
    ++i;
  }
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (auto sw = switches.find(a); sw != switches.end()) {
      *sw->second = true;
      continue;
    }
    if (i + 1 >= argc) return unexpected(a + (words.count(a) || numbers.count(a) ? " needs a value" : ": unknown option"));
    const std::string v = argv[++i];
    if (auto w = words.find(a); w != words.end()) {
      *w->second = v;
    } else if (auto n = numbers.find(a); n != numbers.end()) {
      auto d = number(a, v);
      if (!d) return unexpected(d.error());
      std::visit([&](auto* field) { *field = static_cast<std::remove_pointer_t<decltype(field)>>(*d); }, n->second);
    } else if (a == "--job") {
      o.job_texts.push_back(v);
    } else if (a == "--jobs") {
      std::stringstream in(v);
      for (std::string id; std::getline(in, id, ',');) o.only_jobs.push_back(static_cast<uint32_t>(std::strtoul(id.c_str(), nullptr, 10)));
    } else if (a == "--mode") {
      if (v != "open" && v != "closed") return unexpected("--mode: '" + v + "' is not open|closed");
      o.run.mode = v == "open" ? gen::LoopMode::open : gen::LoopMode::closed;
    } else if (a == "--inject") {
      if (auto r = parse_inject(v, o.run); !r) return unexpected(r.error());
    } else {
      return unexpected("unknown option '" + a + "'");
    }
  }
  if (o.run.loss >= 1 || o.run.dup >= 1) return unexpected(std::string("--loss and --dup are fractions below 1"));
  if (o.pcap_rounds == 0) return unexpected(std::string("--pcap-rounds must be at least 1"));
  return o;
}

}  // namespace phub::pktgen

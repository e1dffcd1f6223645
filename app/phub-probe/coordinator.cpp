// The coordinator: control connections, tournament rounds, sample collection and progress.
#include "coordinator.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "auth.hpp"
#include "control.hpp"
#include "hosts_file.hpp"
#include "net.hpp"
#include "phub/topo/schedule.hpp"

namespace phub::probe {
namespace {

using Pair = std::pair<size_t, size_t>;

class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), enabled_(enabled), tty_(isatty(2) != 0), t0_(monotonic_ns()) {}
  void update(size_t done, size_t round, size_t rounds) {
    if (!enabled_ || (!tty_ && done != total_ && round == last_round_)) return;
    last_round_ = round;
    const double elapsed = static_cast<double>(monotonic_ns() - t0_) / 1e9;
    const double left = done == 0 ? 0.0 : elapsed / static_cast<double>(done) * static_cast<double>(total_ - done);
    std::fprintf(stderr, "%s[phub-probe] round %zu/%zu  pairs %zu/%zu  %.1f s elapsed  ~%.1f s left%s",
                 tty_ ? "\r" : "", round, rounds, done, total_, elapsed, left, tty_ ? "   " : "\n");
    std::fflush(stderr);
  }
  void finish() {
    if (enabled_ && tty_) std::fprintf(stderr, "\n");
  }
  [[nodiscard]] double elapsed_s() const { return static_cast<double>(monotonic_ns() - t0_) / 1e9; }

 private:
  size_t total_;
  bool enabled_, tty_;
  uint64_t t0_;
  size_t last_round_ = 0;
};

// One agent's control connection, authenticated.
struct Link {
  explicit Link(LineConn c) : conn(std::move(c)) {}
  LineConn conn;
  std::optional<SecureLine> line;
};

// The agents' control connections and where each one takes probe datagrams.
struct Agents {
  std::vector<std::unique_ptr<Link>> links;
  std::vector<topo::Host> probe_at;  // from the greeting "OK phub-probe 2 <transport> <addr>:<port>"
};

// The probe endpoint an agent's greeting advertises (a DPDK agent probes on its port's own address);
// `fallback`, its control endpoint, when the greeting names none.
topo::Host advertised_endpoint(const std::string& greeting, const topo::Host& fallback) {
  std::istringstream in(greeting.substr(std::string_view(kProtocolGreeting).size()));
  std::string transport, endpoint;
  if (!(in >> transport >> endpoint)) return fallback;
  auto at = parse_endpoint(endpoint);
  if (!at) return fallback;
  at->name = fallback.name;
  return *at;
}

// Connects to every agent in parallel, authenticates, checks its greeting, then gives every agent the run's
// host list (control and probe endpoints), the only targets it will probe or send bulk bytes to.
Agents connect_all(const std::vector<topo::Host>& hosts, const std::string& token, int timeout_ms) {
  Agents a{std::vector<std::unique_ptr<Link>>(hosts.size()), hosts};
  std::vector<std::string> errors(hosts.size());
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < hosts.size(); ++i)
      threads.emplace_back([&, i] {
        auto fd = tcp_connect(hosts[i].addr, hosts[i].port, timeout_ms);
        if (!fd) return void(errors[i] = fd.error());
        auto link = std::make_unique<Link>(LineConn(std::move(*fd)));
        auto key = initiate_handshake(link->conn, token, timeout_ms);
        if (!key) return void(errors[i] = key.error());
        SecureLine& line = link->line.emplace(link->conn, *key, /*initiator=*/true);
        auto hello = line.write_line("HELLO") ? line.read_line(timeout_ms) : Expected<std::string, std::string>(unexpected(std::string("send failed")));
        if (!hello || hello->rfind(kProtocolGreeting, 0) != 0) return void(errors[i] = hello ? "bad greeting: " + *hello : hello.error());
        a.probe_at[i] = advertised_endpoint(*hello, hosts[i]);
        a.links[i] = std::move(link);
      });
  }
  std::string list = "HOSTS " + std::to_string(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i)
    list += " " + hosts[i].addr + ":" + std::to_string(hosts[i].port) + " " + a.probe_at[i].addr + ":" +
            std::to_string(a.probe_at[i].port);
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!a.links[i]) continue;
    SecureLine& line = *a.links[i]->line;
    auto ok = line.write_line(list) ? line.read_line(timeout_ms) : Expected<std::string, std::string>(unexpected(std::string("send failed")));
    if (!ok || *ok != "OK " + std::to_string(hosts.size())) {
      errors[i] = "host list not taken: " + (ok ? *ok : ok.error());
      a.links[i].reset();
    }
  }
  for (size_t i = 0; i < hosts.size(); ++i)
    if (!a.links[i]) std::fprintf(stderr, "[phub-probe] agent %s (%s:%u) unreachable: %s\n", hosts[i].name.c_str(),
                                  hosts[i].addr.c_str(), hosts[i].port, errors[i].c_str());
  return a;
}

std::optional<topo::PairStats> parse_samples(const std::string& line) {
  std::istringstream in(line);
  std::string word;
  unsigned sent = 0;
  if (!(in >> word >> sent) || word != "SAMPLES") return std::nullopt;
  std::vector<double> us;
  for (uint64_t ns = 0; in >> ns;) us.push_back(static_cast<double>(ns) / 1000.0);
  return topo::summarize(us, sent);
}

class Tournament {
 public:
  Tournament(const std::vector<topo::Host>& hosts, const RunOptions& o)
      : hosts_(hosts), o_(o), agents_(connect_all(hosts, o.token, o.connect_timeout_ms)) {}

  [[nodiscard]] bool up(size_t i) const { return agents_.links[i] != nullptr; }

  // Sends `command(pair)` to the first host of each pair whose agents are both up, then collects the
  // replies; `record` gets each reply line. Agents that fail are dropped for the rest of the run.
  template <class Command, class Record>
  void phase(const std::vector<Pair>& pairs, int timeout_ms, Command command, Record record, const std::function<void()>& tick) {
    std::vector<Pair> sent;
    for (const Pair& p : pairs) {
      if (up(p.first) && up(p.second) && agents_.links[p.first]->line->write_line(command(p))) sent.push_back(p);
      else tick();
    }
    for (const Pair& p : sent) {
      auto line = agents_.links[p.first]->line->read_line(timeout_ms);
      if (!line) {
        std::fprintf(stderr, "\n[phub-probe] agent %s stopped answering: %s\n", hosts_[p.first].name.c_str(), line.error().c_str());
        agents_.links[p.first].reset();
      } else {
        record(p, *line);
      }
      tick();
    }
  }

  [[nodiscard]] std::string probe_command(const Pair& p) const {
    const topo::Host& peer = agents_.probe_at[p.second];
    return "PROBE " + peer.addr + " " + std::to_string(peer.port) + " " + std::to_string(o_.samples) + " " +
           std::to_string(o_.interval_us) + " " + std::to_string(o_.timeout_us) + " " + std::to_string(o_.payload_bytes) +
           " " + std::to_string(std::min(o_.give_up_after, o_.samples));
  }

 private:
  const std::vector<topo::Host>& hosts_;
  const RunOptions& o_;
  Agents agents_;
};

}  // namespace

Expected<void, std::string> check_run_options(const RunOptions& o) {
  const ProbeParams p{o.samples, o.interval_us, o.timeout_us, o.payload_bytes, std::min(o.give_up_after, o.samples)};
  if (const std::string why = probe_refusal(p); !why.empty()) return unexpected("agents would refuse these probes: " + why);
  if (o.bandwidth)
    if (const std::string why = bulk_refusal(o.bulk_bytes); !why.empty())
      return unexpected("agents would refuse this bulk transfer: " + why);
  if (o.token.empty()) return unexpected(std::string("no token: PHUB_PROBE_TOKEN, --token-file FILE or \"token = VALUE\" in the hosts file"));
  return {};
}

Expected<Measurement, std::string> measure(const std::vector<topo::Host>& hosts, const RunOptions& o) {
  if (auto ok = check_run_options(o); !ok) return unexpected(ok.error());
  if (hosts.size() > Limits::kMaxRunHosts)
    return unexpected("agents take at most " + std::to_string(Limits::kMaxRunHosts) + " hosts in a run");
  Measurement out{topo::Matrix(hosts), {}};
  const uint64_t t0 = monotonic_ns();
  Tournament t(hosts, o);
  for (size_t i = 0; i < hosts.size(); ++i)
    if (!t.up(i)) out.info.unreachable.push_back(i);
  const auto rounds = topo::tournament_rounds(hosts.size());
  const size_t phases = o.bandwidth ? 2 : 1;
  const size_t total = hosts.size() * (hosts.size() - 1) / 2 * phases;
  Progress progress(total, o.progress);
  size_t done = 0, round_no = 0;
  const int probe_timeout_ms =
      static_cast<int>(uint64_t{o.samples} * (o.interval_us + o.timeout_us) / 1000u) + 5000;
  for (const auto& round : rounds) {
    ++round_no;
    auto tick = [&] { progress.update(++done, round_no, rounds.size()); };
    t.phase(round, probe_timeout_ms, [&](const Pair& p) { return t.probe_command(p); },
            [&](const Pair& p, const std::string& line) {
              if (auto s = parse_samples(line)) out.matrix.set(p.first, p.second, *s);
              else std::fprintf(stderr, "\n[phub-probe] %s -> %s: %s\n", hosts[p.first].name.c_str(), hosts[p.second].name.c_str(), line.c_str());
            },
            tick);
    if (!o.bandwidth) continue;
    t.phase(round, 120'000,
            [&](const Pair& p) {
              return "BULK " + hosts[p.second].addr + " " + std::to_string(hosts[p.second].port) + " " + std::to_string(o.bulk_bytes);
            },
            [&](const Pair& p, const std::string& line) {
              std::istringstream in(line);
              std::string word;
              double bw = 0.0;
              topo::PairStats s = out.matrix.at(p.first, p.second);
              if (in >> word >> bw && word == "BW" && s.present) s.bw_bytes_per_s = bw, out.matrix.set(p.first, p.second, s);
            },
            tick);
  }
  progress.finish();
  out.info.measured = true;
  out.info.samples = o.samples;
  out.info.bandwidth = o.bandwidth;
  out.info.wall_s = static_cast<double>(monotonic_ns() - t0) / 1e9;
  return out;
}

}  // namespace phub::probe

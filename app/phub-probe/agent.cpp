// The probe agent: reflector thread, control listener, one thread per authenticated control connection.
#include "agent.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdio>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "auth.hpp"
#include "control.hpp"
#include "hosts_file.hpp"
#include "net.hpp"
#include "transport.hpp"

namespace phub::probe {
namespace {

constexpr int kIdleMs = 600'000;       // a control connection may idle this long between commands
constexpr int kBulkTimeoutMs = 60'000;
constexpr uint64_t kLogFirst = 20, kLogEvery = 1000;  // then one log line per this many events of a kind

using Endpoint = std::pair<std::string, uint16_t>;

// The hosts of the run, as the coordinator sent them: where the agent may send probes and bulk bytes.
struct RunHosts {
  std::set<Endpoint> control, probe;
};

struct Counters {
  std::atomic<uint64_t> sessions{0}, auth_failed{0}, bad_mac{0}, over_limit{0}, refused{0};
};

std::string peer_of(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

// Logs the first events of a kind, then one in kLogEvery, so that a flood of them cannot flood the log.
void log_event(uint64_t count, const std::string& what) {
  if (count <= kLogFirst || count % kLogEvery == 0)
    std::fprintf(stderr, "phub-probe agent: %s (%llu so far)\n", what.c_str(), static_cast<unsigned long long>(count));
}

class Agent {
 public:
  Agent(ProbeTransport& t, std::string token) : t_(t), token_(std::move(token)) {}

  // One control connection, from the handshake to its end.
  void serve(LineConn& c) {
    const std::string peer = peer_of(c.fd());
    auto key = accept_handshake(c, token_, Limits::kHandshakeTimeoutMs);
    if (!key) {
      log_event(++counters_.auth_failed, "control connection from " + peer + " failed authentication: " + key.error() + "; closed");
      return;
    }
    ++counters_.sessions;
    SecureLine line(c, *key, /*initiator=*/false);
    std::optional<RunHosts> run;
    for (;;) {
      auto text = line.read_line(kIdleMs);
      if (!text) {
        if (text.error().find("MAC") != std::string::npos)
          log_event(++counters_.bad_mac, "control connection from " + peer + ": " + text.error() + "; closed");
        return;
      }
      std::istringstream args(*text);
      std::string cmd;
      args >> cmd;
      std::string reply;
      if (cmd == "HELLO") {
        const topo::Host at = t_.endpoint();
        reply = std::string(kProtocolGreeting) + " " + std::string(t_.name()) + " " + at.addr + ":" + std::to_string(at.port);
      } else if (cmd == "HOSTS") {
        reply = run ? kRefused + std::string("the run's host list is already set") : set_hosts(args, run);
      } else if (cmd == "PROBE") {
        reply = probe(args, run);
      } else if (cmd == "BULK") {
        reply = bulk(args, run);
      } else if (cmd == "SINK") {
        uint64_t bytes = 0;
        if (!(args >> bytes)) return;
        if (const std::string why = bulk_refusal(bytes); !why.empty()) {
          reply = kRefused + why;
          (void)line.write_line(reply);
          log_event(++counters_.refused, "refused SINK from " + peer + ": " + why);
          return;  // the bytes that follow would be taken for commands
        }
        auto ok = line.raw().drain(bytes, kBulkTimeoutMs);
        reply = ok ? "OK" : "ERR " + ok.error();
      } else if (cmd == "QUIT") {
        return;
      } else {
        reply = "ERR unknown command \"" + cmd + "\"";
      }
      if (reply.rfind(kRefused, 0) == 0)
        log_event(++counters_.refused, "refused " + cmd + " from " + peer + ": " + reply.substr(std::string_view(kRefused).size()));
      if (!line.write_line(reply)) return;
    }
  }

  void count_over_limit(const std::string& peer) {
    log_event(++counters_.over_limit, "control connection from " + peer + " refused: " +
                                          std::to_string(Limits::kMaxConnections) + " are open");
  }

  void report() const {
    std::fprintf(stderr,
                 "phub-probe agent: control: %llu sessions authenticated, %llu failed authentication, %llu closed on "
                 "a bad line MAC, %llu connections over the limit, %llu requests refused\n",
                 static_cast<unsigned long long>(counters_.sessions.load()),
                 static_cast<unsigned long long>(counters_.auth_failed.load()),
                 static_cast<unsigned long long>(counters_.bad_mac.load()),
                 static_cast<unsigned long long>(counters_.over_limit.load()),
                 static_cast<unsigned long long>(counters_.refused.load()));
  }

 private:
  static std::string set_hosts(std::istringstream& args, std::optional<RunHosts>& run) {
    size_t n = 0;
    if (!(args >> n) || n < 2) return "ERR usage: HOSTS n (ctl_addr:port probe_addr:port){n}, n >= 2";
    if (n > Limits::kMaxRunHosts)
      return kRefused + std::to_string(n) + " hosts is above the limit of " + std::to_string(Limits::kMaxRunHosts);
    RunHosts hosts;
    for (size_t i = 0; i < n; ++i) {
      std::string ctl, probe;
      if (!(args >> ctl >> probe)) return "ERR HOSTS: " + std::to_string(n) + " hosts announced, fewer given";
      auto c = parse_endpoint(ctl);
      auto p = parse_endpoint(probe);
      if (!c || !p) return "ERR HOSTS: " + (c ? p.error() : c.error());
      hosts.control.insert({c->addr, c->port});
      hosts.probe.insert({p->addr, p->port});
    }
    if (std::string extra; args >> extra) return "ERR HOSTS: more than " + std::to_string(n) + " hosts given";
    run = std::move(hosts);
    return "OK " + std::to_string(n);
  }

  std::string probe(std::istringstream& args, const std::optional<RunHosts>& run) {
    topo::Host peer;
    ProbeParams p;
    if (!(args >> peer.addr >> peer.port >> p.count >> p.interval_us >> p.timeout_us >> p.payload_bytes >> p.give_up_after))
      return "ERR usage: PROBE addr port count interval_us timeout_us payload_bytes give_up_after";
    if (!run) return kRefused + std::string("no host list for this run (HOSTS first)");
    if (!run->probe.contains({peer.addr, peer.port}))
      return kRefused + peer.addr + ":" + std::to_string(peer.port) + " is not a probe endpoint of this run";
    if (const std::string why = probe_refusal(p); !why.empty()) return kRefused + why;
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy) return kRefused + std::string("busy: another probe or bulk transfer is running");
    auto s = t_.probe(peer, p);
    if (!s) return "ERR " + s.error();
    std::string out = "SAMPLES " + std::to_string(s->sent);
    for (double us : s->rtt_us) out += " " + std::to_string(static_cast<uint64_t>(us * 1000.0));
    return out;
  }

  std::string bulk(std::istringstream& args, const std::optional<RunHosts>& run) {
    std::string addr;
    uint16_t port = 0;
    uint64_t bytes = 0;
    if (!(args >> addr >> port >> bytes)) return "ERR usage: BULK addr port bytes";
    if (!run) return kRefused + std::string("no host list for this run (HOSTS first)");
    if (!run->control.contains({addr, port}))
      return kRefused + addr + ":" + std::to_string(port) + " is not a control endpoint of this run";
    if (const std::string why = bulk_refusal(bytes); !why.empty()) return kRefused + why;
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy) return kRefused + std::string("busy: another probe or bulk transfer is running");
    const uint64_t t0 = monotonic_ns();
    auto fd = tcp_connect(addr, port, 2000);
    if (!fd) return "ERR " + fd.error();
    LineConn c(std::move(*fd));
    auto key = initiate_handshake(c, token_, Limits::kHandshakeTimeoutMs);
    if (!key) return "ERR sink " + addr + ":" + std::to_string(port) + ": " + key.error();
    SecureLine line(c, *key, /*initiator=*/true);
    const std::string zeros(65536, '\0');
    if (auto ok = line.write_line("SINK " + std::to_string(bytes)); !ok) return "ERR " + ok.error();
    for (uint64_t left = bytes; left > 0;) {
      const uint64_t n = std::min<uint64_t>(left, zeros.size());
      if (auto ok = c.write_all(std::string_view(zeros).substr(0, n)); !ok) return "ERR " + ok.error();
      left -= n;
    }
    auto reply = line.read_line(kBulkTimeoutMs);
    if (!reply || *reply != "OK") return "ERR sink: " + (reply ? *reply : reply.error());
    const double secs = static_cast<double>(monotonic_ns() - t0) / 1e9;
    return "BW " + std::to_string(static_cast<uint64_t>(static_cast<double>(bytes) / secs));
  }

  ProbeTransport& t_;
  std::string token_;
  std::mutex busy_;  // one outgoing probe or bulk transfer at a time, whichever connection asks
  Counters counters_;
};

// Control connections, one thread each, at most Limits::kMaxConnections; on shutdown their sockets are shut
// down so that reads return.
class Sessions {
 public:
  [[nodiscard]] size_t open() {
    std::lock_guard lock(mu_);
    return live_.size();
  }
  void start(LineConn c, Agent& agent) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    const int fd = c.fd();
    {
      std::lock_guard lock(mu_);
      live_.insert(fd);
    }
    threads_.push_back({done, std::jthread([this, c = std::move(c), &agent, done, fd]() mutable {
                          agent.serve(c);
                          std::lock_guard lock(mu_);
                          live_.erase(fd);  // before `c` closes the fd, so shutdown_all never hits a reused number
                          done->store(true);
                        })});
  }
  void reap() {
    threads_.remove_if([](const Session& s) { return s.done->load(); });
  }
  void shutdown_all() {
    std::lock_guard lock(mu_);
    for (int fd : live_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  struct Session {
    std::shared_ptr<std::atomic<bool>> done;
    std::jthread thread;
  };
  std::mutex mu_;
  std::set<int> live_;
  std::list<Session> threads_;
};

}  // namespace

int run_agent(const topo::Host& listen, ProbeTransport& t, const std::string& token, const std::atomic<bool>& stop) {
  auto lfd = tcp_listen(listen.addr, listen.port);
  if (!lfd) {
    std::fprintf(stderr, "phub-probe agent: %s\n", lfd.error().c_str());
    return 1;
  }
  std::jthread reflector([&] { t.reflect(stop); });
  Agent agent(t, token);
  {
    Sessions sessions;
    const topo::Host at = t.endpoint();
    std::fprintf(stderr, "phub-probe agent: control on tcp %s:%u, probes on %s %s:%u\n", listen.addr.c_str(),
                 listen.port, std::string(t.name()).c_str(), at.addr.c_str(), at.port);
    while (!stop.load()) {
      sessions.reap();
      pollfd p{lfd->get(), POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      UniqueFd conn(::accept4(lfd->get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) continue;
      if (sessions.open() >= Limits::kMaxConnections) {
        const std::string busy = std::string(kRefused) + "too many control connections\n";
        (void)::send(conn.get(), busy.data(), busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        agent.count_over_limit(peer_of(conn.get()));
        continue;  // closed here
      }
      sessions.start(LineConn(std::move(conn)), agent);
    }
    sessions.shutdown_all();  // wakes blocked reads; the session threads then end and are joined
  }
  agent.report();
  return 0;
}

}  // namespace phub::probe

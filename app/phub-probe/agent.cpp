// The probe agent: reflector thread, control listener, one thread per control connection.
#include "agent.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cstdio>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "control.hpp"
#include "net.hpp"
#include "transport.hpp"

namespace phub::probe {
namespace {

constexpr int kIdleMs = 600'000;       // a control connection may idle this long between commands
constexpr int kBulkTimeoutMs = 60'000;

std::string do_probe(ProbeTransport& t, std::istringstream& args) {
  topo::Host peer;
  ProbeParams p;
  if (!(args >> peer.addr >> peer.port >> p.count >> p.interval_us >> p.timeout_us >> p.payload_bytes >> p.give_up_after))
    return "ERR usage: PROBE addr port count interval_us timeout_us payload_bytes give_up_after";
  auto s = t.probe(peer, p);
  if (!s) return "ERR " + s.error();
  std::string out = "SAMPLES " + std::to_string(s->sent);
  for (double us : s->rtt_us) out += " " + std::to_string(static_cast<uint64_t>(us * 1000.0));
  return out;
}

std::string do_bulk(std::istringstream& args) {
  std::string addr;
  uint16_t port = 0;
  uint64_t bytes = 0;
  if (!(args >> addr >> port >> bytes) || bytes == 0) return "ERR usage: BULK addr port bytes";
  const uint64_t t0 = monotonic_ns();
  auto fd = tcp_connect(addr, port, 2000);
  if (!fd) return "ERR " + fd.error();
  LineConn c(std::move(*fd));
  const std::string zeros(65536, '\0');
  if (auto ok = c.write_all("SINK " + std::to_string(bytes) + "\n"); !ok) return "ERR " + ok.error();
  for (uint64_t left = bytes; left > 0;) {
    const uint64_t n = std::min<uint64_t>(left, zeros.size());
    if (auto ok = c.write_all(std::string_view(zeros).substr(0, n)); !ok) return "ERR " + ok.error();
    left -= n;
  }
  auto reply = c.read_line(kBulkTimeoutMs);
  if (!reply || *reply != "OK") return "ERR sink: " + (reply ? *reply : reply.error());
  const double secs = static_cast<double>(monotonic_ns() - t0) / 1e9;
  return "BW " + std::to_string(static_cast<uint64_t>(static_cast<double>(bytes) / secs));
}

void serve_connection(LineConn& c, ProbeTransport& t) {
  for (;;) {
    auto line = c.read_line(kIdleMs);
    if (!line) return;
    std::istringstream args(*line);
    std::string cmd;
    args >> cmd;
    std::string reply;
    if (cmd == "HELLO") {
      const topo::Host at = t.endpoint();
      reply = std::string(kProtocolGreeting) + " " + std::string(t.name()) + " " + at.addr + ":" + std::to_string(at.port);
    } else if (cmd == "PROBE") {
      reply = do_probe(t, args);
    } else if (cmd == "BULK") {
      reply = do_bulk(args);
    } else if (cmd == "SINK") {
      uint64_t bytes = 0;
      if (!(args >> bytes)) return;
      auto ok = c.drain(bytes, kBulkTimeoutMs);
      reply = ok ? "OK" : "ERR " + ok.error();
    } else if (cmd == "QUIT") {
      return;
    } else {
      reply = "ERR unknown command \"" + cmd + "\"";
    }
    if (!c.write_all(reply + "\n")) return;
  }
}

// Control connections, one thread each; on shutdown their sockets are shut down so that reads return.
class Sessions {
 public:
  void start(LineConn c, ProbeTransport& t) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    const int fd = c.fd();
    {
      std::lock_guard lock(mu_);
      live_.insert(fd);
    }
    threads_.push_back({done, std::jthread([this, c = std::move(c), &t, done, fd]() mutable {
                          serve_connection(c, t);
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

int run_agent(const topo::Host& listen, ProbeTransport& t, const std::atomic<bool>& stop) {
  auto lfd = tcp_listen(listen.addr, listen.port);
  if (!lfd) {
    std::fprintf(stderr, "phub-probe agent: %s\n", lfd.error().c_str());
    return 1;
  }
  std::jthread reflector([&] { t.reflect(stop); });
  Sessions sessions;
  const topo::Host at = t.endpoint();
  std::fprintf(stderr, "phub-probe agent: control on tcp %s:%u, probes on %s %s:%u\n", listen.addr.c_str(), listen.port,
               std::string(t.name()).c_str(), at.addr.c_str(), at.port);
  while (!stop.load()) {
    sessions.reap();
    pollfd p{lfd->get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    Fd conn(::accept4(lfd->get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.valid()) sessions.start(LineConn(std::move(conn)), t);
  }
  sessions.shutdown_all();  // wakes blocked reads; the session threads then end and are joined
  return 0;
}

}  // namespace phub::probe

// A user-space delay line: forwards every frame between two interfaces (AF_PACKET) after a configured
// delay, with optional uniform jitter and a reorder probability. Stands in for netem, which this kernel lacks.
//   delayline --a IF --b IF --delay-us D [--jitter-us J] [--reorder P] [--reorder-extra-us E] [--seed S]
// PACKET_VNET_HDR is used on both sockets so that GSO frames and partial checksums pass through intact.
// Counters (forwarded, dropped, and reordered: frames sent after a frame that arrived later, per direction) are
// printed on stderr at exit and on SIGUSR1.
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr size_t kVnetHdrBytes = 10;  // struct virtio_net_hdr (its header is not valid C++)
constexpr size_t kFrameMax = 65536 + kVnetHdrBytes + 64;
constexpr size_t kQueueMax = 20000;

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_report = 0;
void on_signal(int) { g_stop = 1; }
void on_report(int) { g_report = 1; }

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "delayline: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

int open_port(const char* ifname) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) die("socket");
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) die("PACKET_VNET_HDR");
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) die("PACKET_IGNORE_OUTGOING");
  const int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname));
  if (sll.sll_ifindex == 0) die(std::string("no interface ") + ifname);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) die("bind");
  packet_mreq mr{};
  mr.mr_ifindex = sll.sll_ifindex;
  mr.mr_type = PACKET_MR_PROMISC;
  setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr);
  return fd;
}

struct Frame {
  uint64_t due_ns;
  uint64_t order;  // arrival order breaks ties, so equal delays never reorder
  std::vector<uint8_t> bytes;
  bool operator>(const Frame& o) const { return due_ns != o.due_ns ? due_ns > o.due_ns : order > o.order; }
};

struct Options {
  const char* a = nullptr;
  const char* b = nullptr;
  double delay_us = 0, jitter_us = 0, reorder = 0, reorder_extra_us = 0;
  unsigned seed = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    if (f == "--a") o.a = v;
    else if (f == "--b") o.b = v;
    else if (f == "--delay-us") o.delay_us = std::atof(v);
    else if (f == "--jitter-us") o.jitter_us = std::atof(v);
    else if (f == "--reorder") o.reorder = std::atof(v);
    else if (f == "--reorder-extra-us") o.reorder_extra_us = std::atof(v);
    else if (f == "--seed") o.seed = static_cast<unsigned>(std::atoi(v));
    else { std::fprintf(stderr, "delayline: unknown option %s\n", f.c_str()); std::exit(2); }
  }
  if (o.a == nullptr || o.b == nullptr) {
    std::fprintf(stderr, "usage: delayline --a IF --b IF --delay-us D [--jitter-us J] [--reorder P] [--reorder-extra-us E]\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  signal(SIGUSR1, on_report);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const int fd[2] = {open_port(o.a), open_port(o.b)};
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::priority_queue<Frame, std::vector<Frame>, std::greater<>> q[2];  // q[d]: frames to send out of fd[d]
  uint64_t seq = 0, forwarded[2] = {0, 0}, dropped = 0, reordered[2] = {0, 0};
  uint64_t newest_sent[2] = {0, 0};  // 1 + the arrival order of the latest-arrived frame sent out of fd[d]
  auto report = [&]() {
    std::fprintf(stderr, "delayline %s<->%s: forwarded %llu/%llu, dropped %llu, reordered %llu/%llu\n", o.a, o.b,
                 static_cast<unsigned long long>(forwarded[1]), static_cast<unsigned long long>(forwarded[0]),
                 static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(reordered[1]),
                 static_cast<unsigned long long>(reordered[0]));
  };
  std::vector<uint8_t> buf(kFrameMax);
  while (g_stop == 0) {
    if (g_report != 0) {
      g_report = 0;
      report();
    }
    for (int d = 0; d < 2; ++d)
      while (!q[d].empty() && q[d].top().due_ns <= now_ns()) {
        const Frame& f = q[d].top();
        if (f.order + 1 < newest_sent[d]) ++reordered[d];  // a frame that arrived after it has already left
        else newest_sent[d] = f.order + 1;
        if (send(fd[d], f.bytes.data(), f.bytes.size(), 0) >= 0) ++forwarded[d];
        else ++dropped;
        q[d].pop();
      }
    uint64_t next = UINT64_MAX;
    for (int d = 0; d < 2; ++d)
      if (!q[d].empty()) next = std::min(next, q[d].top().due_ns);
    pollfd p[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
    const uint64_t now = now_ns();
    const uint64_t wait = next == UINT64_MAX ? 200000000ull : (next > now ? next - now : 0);
    const timespec ts{static_cast<time_t>(wait / 1000000000ull), static_cast<long>(wait % 1000000000ull)};
    if (ppoll(p, 2, &ts, nullptr) <= 0) continue;
    for (int s = 0; s < 2; ++s) {
      if ((p[s].revents & POLLIN) == 0) continue;
      for (;;) {
        const ssize_t n = recv(fd[s], buf.data(), buf.size(), 0);
        if (n <= 0) break;
        double us = o.delay_us + (o.jitter_us > 0 ? (unit(rng) * 2 - 1) * o.jitter_us : 0.0);
        if (o.reorder > 0 && unit(rng) < o.reorder) us += o.reorder_extra_us;
        const int out = 1 - s;
        if (q[out].size() >= kQueueMax) { ++dropped; continue; }
        q[out].push({now_ns() + static_cast<uint64_t>(std::max(us, 0.0) * 1000.0), seq++,
                     std::vector<uint8_t>(buf.begin(), buf.begin() + n)});
      }
    }
  }
  report();
  return 0;
}

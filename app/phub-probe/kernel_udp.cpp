// The kernel-UDP probe transport: lib/proto probe_request/probe_reply datagrams, kernel receive timestamps.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <optional>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "net.hpp"
#include "phub/base/bytes.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/probe_reflect.hpp"
#include "probe_body.hpp"
#include "transport.hpp"

namespace phub::probe {
namespace {

constexpr size_t kMaxDatagram = 2048;

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Receives one datagram; `rx_ns` is the kernel's receive time (CLOCK_REALTIME) or, without it, now.
ssize_t receive(int fd, std::span<std::byte> buf, sockaddr_in* from, uint64_t& rx_ns) {
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[64];
  msghdr msg{};
  msg.msg_name = from;
  msg.msg_namelen = from != nullptr ? sizeof *from : 0;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  rx_ns = realtime_ns();
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n > 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      rx_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
    }
  return n;
}

class KernelUdp final : public ProbeTransport {
 public:
  KernelUdp(topo::Host local, UniqueFd fd) : local_(std::move(local)), fd_(std::move(fd)) {}

  Expected<ProbeSamples, std::string> probe(const topo::Host& peer, const ProbeParams& p) override {
    auto sock = open_socket(local_.addr, 0);
    if (!sock) return unexpected(sock.error());
    auto to = make_sockaddr(peer.addr, peer.port);
    if (!to) return unexpected(to.error());
    if (::connect(sock->get(), reinterpret_cast<const sockaddr*>(&*to), sizeof *to) != 0)
      return unexpected("connect " + peer.addr + ": " + std::strerror(errno));
    const uint32_t nonce = static_cast<uint32_t>(std::random_device{}());
    ProbeSamples out;
    std::array<std::byte, kMaxDatagram> buf{};
    const size_t payload = std::clamp<size_t>(p.payload_bytes, kMinBodyBytes, kMaxBodyBytes);
    uint64_t next_start = monotonic_ns();
    for (unsigned i = 0; i < p.count; ++i) {
      while (monotonic_ns() < next_start) std::this_thread::sleep_for(std::chrono::nanoseconds(next_start - monotonic_ns()));
      next_start = monotonic_ns() + uint64_t{p.interval_us} * 1000u;
      std::array<std::byte, kMaxDatagram> body{};
      const uint64_t tx_ns = realtime_ns();
      store_be<uint64_t>(body.data() + kBodyStampOffset, tx_ns);
      store_be<uint64_t>(body.data() + kBodyNonceOffset, nonce);
      proto::Header h;
      h.opcode = proto::Opcode::probe_request;
      h.seq = i;
      h.aux = nonce;
      auto len = proto::build_message(h, std::span(body.data(), payload), buf);
      if (!len) return unexpected(std::string("cannot build probe_request"));
      ++out.sent;
      if (::send(sock->get(), buf.data(), *len, 0) < 0) continue;
      if (auto rtt = await_reply(sock->get(), i, nonce, tx_ns, p.timeout_us)) out.rtt_us.push_back(*rtt);
      if (out.sent == p.give_up_after && out.rtt_us.empty()) break;
    }
    return out;
  }

  void reflect(const std::atomic<bool>& stop) override {
    std::array<std::byte, kMaxDatagram> buf{};
    while (!stop.load(std::memory_order_relaxed)) {
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 200) <= 0) continue;
      sockaddr_in from{};
      uint64_t rx_ns = 0;
      const ssize_t n = receive(fd_.get(), buf, &from, rx_ns);
      if (n <= 0) continue;
      auto h = proto::parse_header(std::span(buf.data(), static_cast<size_t>(n)));
      if (!h || h->opcode != proto::Opcode::probe_request) continue;
      proto::write_header(proto::probe_reply_header(*h),
                          std::span<std::byte, proto::kHeaderBytes>(buf.data(), proto::kHeaderBytes));
      ::sendto(fd_.get(), buf.data(), static_cast<size_t>(n), 0, reinterpret_cast<const sockaddr*>(&from), sizeof from);
    }
  }

  std::string_view name() const override { return "kernel-udp"; }
  topo::Host endpoint() const override { return local_; }

  static Expected<UniqueFd, std::string> open_socket(const std::string& addr, uint16_t port) {
    auto sa = make_sockaddr(addr, port);
    if (!sa) return unexpected(sa.error());
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return unexpected(std::string("socket: ") + std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*sa), sizeof *sa) != 0)
      return unexpected("bind udp " + addr + ":" + std::to_string(port) + ": " + std::strerror(errno));
    return fd;
  }

 private:
  // Waits for the reply to request `seq`; earlier (late) replies and foreign datagrams are skipped.
  static std::optional<double> await_reply(int fd, uint32_t seq, uint32_t nonce, uint64_t tx_ns, unsigned timeout_us) {
    const uint64_t deadline = monotonic_ns() + uint64_t{timeout_us} * 1000u;
    std::array<std::byte, kMaxDatagram> buf{};
    for (uint64_t now = monotonic_ns(); now < deadline; now = monotonic_ns()) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>((deadline - now + 999'999) / 1'000'000)) <= 0) continue;
      uint64_t rx_ns = 0;
      const ssize_t n = receive(fd, buf, nullptr, rx_ns);
      if (n <= 0) continue;
      auto h = proto::parse_header(std::span(buf.data(), static_cast<size_t>(n)));
      if (!h || h->opcode != proto::Opcode::probe_reply || h->seq != seq || h->aux != nonce) continue;
      const auto body = std::span<const std::byte>(buf.data() + proto::kHeaderBytes, h->payload_bytes);
      if (body.size() < kMinBodyBytes || load_be<uint64_t>(body.data() + kBodyStampOffset) != tx_ns) continue;
      return static_cast<double>(subtract_turnaround(rx_ns > tx_ns ? rx_ns - tx_ns : 0, body)) / 1000.0;
    }
    return std::nullopt;
  }

  topo::Host local_;
  UniqueFd fd_;
};

}  // namespace

Expected<std::unique_ptr<ProbeTransport>, std::string> make_kernel_udp(const topo::Host& local) {
  auto fd = KernelUdp::open_socket(local.addr, local.port);
  if (!fd) return unexpected(fd.error());
  return std::unique_ptr<ProbeTransport>(std::make_unique<KernelUdp>(local, std::move(*fd)));
}

}  // namespace phub::probe

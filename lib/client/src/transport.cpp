// The client's UDP socket: set-up, batched sends with GSO, batched receives with GRO, fault injection.
#include "phub/client/transport.hpp"

#include <netinet/ip.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "phub/base/ipv4.hpp"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace phub::client {
namespace {

constexpr size_t kCmsgSpace = CMSG_SPACE(sizeof(uint16_t));
constexpr size_t kRecvCmsgSpace = CMSG_SPACE(sizeof(int));

Unexpected<Error> sys_fail(const std::string& what) {
  return fail(PHUB_ERR_SYSTEM, what + ": " + std::strerror(errno));
}

void set_buffer(int fd, int force_opt, int opt, uint32_t bytes) {
  const int v = static_cast<int>(bytes);
  if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) != 0) (void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

}  // namespace

Result<std::unique_ptr<Transport>> Transport::open(const Options& o) {
  std::unique_ptr<Transport> t(new Transport());
  t->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (t->fd_ < 0) return sys_fail("socket");
  set_buffer(t->fd_, SO_RCVBUFFORCE, SO_RCVBUF, o.socket_buffer_bytes);
  set_buffer(t->fd_, SO_SNDBUFFORCE, SO_SNDBUF, o.socket_buffer_bytes / 4);
  const int pmtu = IP_PMTUDISC_DO;  // DF: phub packets always fit the MTU, never fragment
  (void)setsockopt(t->fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);

  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(o.bind_ipv4);
  local.sin_port = htons(o.bind_port);
  if (bind(t->fd_, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
    return sys_fail("bind " + format_ipv4(o.bind_ipv4) + ":" + std::to_string(o.bind_port));
  }
  if (o.gso) {
    int seg = 0;
    socklen_t len = sizeof seg;
    t->gso_ = getsockopt(t->fd_, SOL_UDP, UDP_SEGMENT, &seg, &len) == 0;
  }
  if (o.gro) {
    const int on = 1;
    t->gro_ = setsockopt(t->fd_, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
  }
  t->faults_ = o.faults;
  t->dice_ = FaultDice(o.faults.seed);

  t->msgs_.resize(kSendBatch);
  t->iovs_.resize(kSendBatch * kMaxGsoSegments * kIovsPerPacket);
  t->addrs_.resize(kSendBatch);
  t->cmsgs_.resize(kSendBatch * kCmsgSpace);
  t->group_packets_.resize(kSendBatch);

  t->recv_bytes_ = t->gro_ ? 65536 : 65536 / 4;  // a datagram never exceeds the MTU; GRO batches 64 KiB
  t->rmsgs_.resize(kRecvBatch);
  t->riovs_.resize(kRecvBatch);
  t->raddrs_.resize(kRecvBatch);
  t->rcmsgs_.resize(kRecvBatch * kRecvCmsgSpace);
  t->rbufs_.resize(kRecvBatch * t->recv_bytes_);
  for (size_t i = 0; i < kRecvBatch; ++i) {
    t->riovs_[i] = iovec{t->rbufs_.data() + i * t->recv_bytes_, t->recv_bytes_};
  }
  return t;
}

Transport::~Transport() {
  if (fd_ >= 0) ::close(fd_);
}

size_t Transport::fill_message(size_t m, std::span<const OutPacket> pkts) {
  const OutPacket& first = pkts[0];
  const size_t dgram = first.datagram_bytes();
  size_t n = 1;
  if (gso_) {
    size_t total = dgram;
    while (n < pkts.size() && n < kMaxGsoSegments && pkts[n].to == first.to) {
      const size_t next = pkts[n].datagram_bytes();
      if (next > dgram || total + next > kMaxGsoBytes) break;
      total += next;
      ++n;
      if (next < dgram) break;  // only the last segment of a GSO batch may be shorter
    }
  }
  iovec* iov = &iovs_[m * kMaxGsoSegments * kIovsPerPacket];
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    iov[k++] = iovec{const_cast<std::byte*>(pkts[i].header), proto::kHeaderBytes};
    if (pkts[i].payload_bytes != 0) iov[k++] = iovec{const_cast<std::byte*>(pkts[i].payload), pkts[i].payload_bytes};
    if (pkts[i].tail_bytes != 0) iov[k++] = iovec{const_cast<std::byte*>(pkts[i].tail), pkts[i].tail_bytes};
  }
  auto* sin = reinterpret_cast<sockaddr_in*>(&addrs_[m]);
  *sin = sockaddr_in{};
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(first.to.ipv4);
  sin->sin_port = htons(first.to.port);
  msghdr& mh = msgs_[m].msg_hdr;
  mh = msghdr{};
  mh.msg_name = sin;
  mh.msg_namelen = sizeof(sockaddr_in);
  mh.msg_iov = iov;
  mh.msg_iovlen = k;
  if (n > 1) {
    mh.msg_control = &cmsgs_[m * kCmsgSpace];
    mh.msg_controllen = kCmsgSpace;
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    const auto gso_size = static_cast<uint16_t>(dgram);
    std::memcpy(CMSG_DATA(cm), &gso_size, sizeof gso_size);
  }
  group_packets_[m] = n;
  return n;
}

Result<size_t> Transport::send_now(std::span<const OutPacket> pkts) {
  size_t done = 0;
  while (done < pkts.size()) {
    size_t m = 0;
    for (size_t at = done; m < kSendBatch && at < pkts.size(); ++m) at += fill_message(m, pkts.subspan(at));
    const int r = sendmmsg(fd_, msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) break;
      if (gso_ && (errno == EIO || errno == EINVAL)) {
        gso_ = false;  // the route's device cannot segment: fall back to one datagram per packet
        continue;
      }
      if (errno == EINTR) continue;
      return sys_fail("sendmmsg");
    }
    ++counters_.send_batches;
    for (int i = 0; i < r; ++i) done += group_packets_[static_cast<size_t>(i)];
    if (static_cast<size_t>(r) < m) break;
  }
  counters_.packets_sent += done;
  return done;
}

std::span<const OutPacket> Transport::apply_faults(std::span<const OutPacket> pkts, std::vector<size_t>& origin) {
  faulted_.clear();
  origin.clear();
  // Packets held back by the previous call go out behind this call's packets (reordering).
  std::vector<OutPacket> held = std::move(held_);
  std::vector<std::byte> held_bytes = std::move(held_bytes_);
  held_.clear();
  held_bytes_.clear();
  for (size_t i = 0; i < pkts.size(); ++i) {
    if (dice_.roll(faults_.drop_tx_ppm)) {
      ++counters_.fault_drops;
      continue;
    }
    if (dice_.roll(faults_.reorder_tx_ppm)) {
      held_.push_back(pkts[i]);
      continue;
    }
    faulted_.push_back(pkts[i]);
    origin.push_back(i);
    if (dice_.roll(faults_.dup_tx_ppm)) {
      faulted_.push_back(pkts[i]);
      origin.push_back(i);
    }
  }
  // Copy the held packets: the caller's header memory is reused after this call.
  size_t bytes = 0;
  for (const auto& p : held_) bytes += p.datagram_bytes();
  held_bytes_.resize(bytes);
  size_t at = 0;
  for (auto& p : held_) {
    std::byte* to = &held_bytes_[at];
    std::memcpy(to, p.header, proto::kHeaderBytes);
    if (p.payload_bytes != 0) std::memcpy(to + proto::kHeaderBytes, p.payload, p.payload_bytes);
    if (p.tail_bytes != 0) std::memcpy(to + proto::kHeaderBytes + p.payload_bytes, p.tail, p.tail_bytes);
    p.header = to;
    p.payload = to + proto::kHeaderBytes;
    p.tail = to + proto::kHeaderBytes + p.payload_bytes;
    at += p.datagram_bytes();
  }
  for (const auto& p : held) {
    faulted_.push_back(p);
    origin.push_back(pkts.size());  // taken once sent; never blocks the caller's packets
  }
  held_scratch_ = std::move(held_bytes);  // keep the previous copies alive during this send
  return faulted_;
}

Result<size_t> Transport::send(std::span<const OutPacket> pkts) {
  if (!faults_.any() || pkts.empty()) return send_now(pkts);
  auto eff = apply_faults(pkts, origin_);
  auto sent = send_now(eff);
  if (!sent) return sent;
  if (*sent == eff.size()) return pkts.size();
  // Blocked part-way: the caller's packets from the first unsent one on are not taken.
  size_t taken = pkts.size();
  for (size_t i = *sent; i < eff.size(); ++i) taken = std::min(taken, origin_[i]);
  return taken;
}

Result<size_t> Transport::recv_batch() {
  for (size_t i = 0; i < kRecvBatch; ++i) {
    msghdr& mh = rmsgs_[i].msg_hdr;
    mh = msghdr{};
    mh.msg_name = &raddrs_[i];
    mh.msg_namelen = sizeof(sockaddr_storage);
    mh.msg_iov = &riovs_[i];
    mh.msg_iovlen = 1;
    mh.msg_control = &rcmsgs_[i * kRecvCmsgSpace];
    mh.msg_controllen = kRecvCmsgSpace;
  }
  while (true) {
    const int r = recvmmsg(fd_, rmsgs_.data(), kRecvBatch, MSG_DONTWAIT, nullptr);
    if (r >= 0) {
      if (r > 0) ++counters_.recv_batches;
      return static_cast<size_t>(r);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    if (errno == EINTR) continue;
    if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH) return size_t{0};  // ICMP: retried
    return sys_fail("recvmmsg");
  }
}

uint16_t Transport::gro_size(size_t i) const noexcept {
  const msghdr& mh = rmsgs_[i].msg_hdr;
  for (const cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(const_cast<msghdr*>(&mh), const_cast<cmsghdr*>(cm))) {
    if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(cm), sizeof size);
      return static_cast<uint16_t>(size);
    }
  }
  return 0;
}

}  // namespace phub::client

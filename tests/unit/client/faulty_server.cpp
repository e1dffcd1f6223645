// The faulty loopback server of the client's unit tests (see faulty_server.hpp).
#include "faulty_server.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "phub/proto/frame.hpp"

namespace phub::client::test {

FaultyServer::FaultyServer(FaultyServerOptions o) : o_(std::move(o)) {
  proto::LayoutParams lp;
  lp.key_elems = o_.keys;
  lp.chunk_elems = o_.chunk_bytes / 4;
  lp.owners = o_.lcores;
  lp.segment_elems = proto::segment_elems(1500, Dtype::fp32);
  auto l = proto::Layout::build(lp);
  if (!l) throw std::runtime_error(l.error());
  layout_ = std::move(*l);
  key_ = proto::derive_key(o_.wrong_tag ? o_.secret + "-other" : o_.secret, o_.job_id);
  peers_.resize(o_.workers);
  peer_known_.assign(o_.workers, false);
  holders_.assign(o_.workers, 0);
  holder_seen_ = std::make_unique<std::atomic<uint32_t>[]>(o_.workers);
  // Find lcores consecutive free ports on loopback.
  for (uint16_t base = static_cast<uint16_t>(42000 + (getpid() % 500) * 16); fds_.size() < o_.lcores; base += 16) {
    for (int fd : fds_) close(fd);
    fds_.clear();
    for (uint16_t i = 0; i < o_.lcores; ++i) {
      const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(base + i));
      if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        break;
      }
      fds_.push_back(fd);
    }
    port_base_ = base;
  }
  thread_ = std::thread([this] { loop(); });
}

phub_config FaultyServer::client_config(uint16_t rank) const {
  phub_config c;
  phub_config_init(&c);
  c.servers = "127.0.0.1";
  c.port_base = port_base_;
  c.server_lcores = o_.lcores;
  c.job_id = o_.job_id;
  c.rank = rank;
  c.workers = o_.workers;
  c.secret = o_.secret.c_str();
  c.reduce = o_.mean ? PHUB_REDUCE_MEAN : PHUB_REDUCE_SUM;
  c.timeout_ms = 5000;
  c.rto_initial_us = 20000;
  c.rto_min_us = 5000;
  c.rto_max_us = 50000;
  return c;
}

FaultyServer::~FaultyServer() {
  stop_ = true;
  thread_.join();
  for (int fd : fds_) close(fd);
}

void FaultyServer::loop() {
  std::vector<pollfd> pfds;
  for (int fd : fds_) pfds.push_back(pollfd{fd, POLLIN, 0});
  std::vector<std::byte> buf(65536);
  while (!stop_) {
    release_held(false);
    if (poll(pfds.data(), pfds.size(), held_.empty() ? 20 : 1) <= 0) continue;
    for (size_t i = 0; i < pfds.size(); ++i) {
      while (true) {
        sockaddr_in from{};
        socklen_t fl = sizeof from;
        const ssize_t n = recvfrom(fds_[i], buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
        if (n <= 0) break;
        if (o_.drop_every != 0 && ++received_ % o_.drop_every == 0) continue;
        handle(fds_[i], static_cast<uint16_t>(i), buf.data(), static_cast<size_t>(n), from);
      }
    }
  }
}

void FaultyServer::send(int fd, const sockaddr_in& to, proto::Header h, const std::vector<float>* payload, uint32_t off,
                      uint32_t n) {
  if (o_.mute) return;
  std::vector<std::byte> out(proto::kHeaderBytes + n * 4);
  h.job_id = o_.job_id;
  if (h.opcode != proto::Opcode::error) h.epoch = epoch_;  // an error names the epoch of what it answers
  h.seq = seq_++;
  auto span = payload != nullptr ? std::span(reinterpret_cast<const std::byte*>(payload->data() + off), n * 4)
                                 : std::span<const std::byte>();
  auto len = proto::build_message(h, span, out);
  if (!len) return;
  if (!o_.secret.empty()) proto::sign_header(key_, std::span<std::byte, proto::kHeaderBytes>(out.data(), proto::kHeaderBytes));
  const bool result = h.opcode == proto::Opcode::result;
  if (result && o_.hold_every != 0 && ++results_ % o_.hold_every == 0) {
    out.resize(*len);
    held_.push_back(Held{fd, to, std::move(out), std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.hold_ms)});
    return;
  }
  const int copies = o_.duplicate_results && result ? 2 : 1;
  for (int i = 0; i < copies; ++i) {
    (void)sendto(fd, out.data(), *len, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  }
}

void FaultyServer::release_held(bool all) {
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < held_.size();) {
    if (!all && held_[i].due > now) {
      ++i;
      continue;
    }
    (void)sendto(held_[i].fd, held_[i].bytes.data(), held_[i].bytes.size(), 0,
                 reinterpret_cast<const sockaddr*>(&held_[i].to), sizeof held_[i].to);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void FaultyServer::send_result(int fd, uint16_t rank, uint32_t chunk, uint32_t round, uint32_t seg,
                             const std::vector<float>& r) {
  const auto& ci = layout_.chunk(chunk);
  proto::Header h;
  h.opcode = proto::Opcode::result;
  h.flags = o_.mean || o_.flag_mean ? proto::flag::mean : 0;
  h.rank = rank;
  h.round = round;
  h.chunk_id = chunk;
  h.elem_offset = layout_.segment_offset(seg);
  h.elem_count = static_cast<uint16_t>(layout_.segment_count_elems(ci, seg));
  send(fd, peers_[rank], h, &r, 0, h.elem_count);
}

void FaultyServer::restore(uint16_t epoch, uint32_t first_round, uint32_t rank0) {
  std::lock_guard<std::mutex> g(restore_mu_);
  restore_ = Restore{epoch, first_round, rank0};
}

void FaultyServer::start_epoch(uint16_t epoch, uint32_t first_round) {
  epoch_ = epoch;
  first_round_ = first_round;
  for (auto& [where, sg] : segs_) {
    sg.round = first_round;
    sg.contributed = 0;
    sg.has_prev = first_round != 0;
    if (sg.has_prev) sg.prev.assign(sg.acc.size(), 0.0f);
  }
  holders_.assign(o_.workers, 0);
  for (uint16_t r = 0; r < o_.workers; ++r) holder_seen_[r] = 0;
  rank0_incarnation_ = 0;
}

void FaultyServer::join(int fd, const proto::Header& h, const sockaddr_in& from) {
  if ((h.flags & proto::flag::epoch_start) != 0 && h.rank == 0 && h.aux != 0 &&
      h.epoch == static_cast<uint16_t>(epoch_ + 1) && holders_[0] != h.aux) {
    start_epoch(h.epoch, 0);
    holders_[0] = h.aux;
  } else if ((h.flags & proto::flag::epoch_start) == 0 && holders_[h.rank] == 0) {
    holders_[h.rank] = h.aux;  // incarnation 0 (a question) claims nothing
  }
  holder_seen_[h.rank] = holders_[h.rank];
  rank0_incarnation_ = holders_[0];
  proto::Header a;
  a.opcode = proto::Opcode::joined;
  a.rank = h.rank;
  a.epoch = epoch_;
  a.round = first_round_;
  a.aux = holders_[h.rank];
  a.elem_offset = holders_[0];
  send(fd, from, a, nullptr, 0, 0);
}

bool FaultyServer::in_epoch(int fd, const proto::Header& h, const sockaddr_in& from) {
  if (h.epoch == epoch_) return true;
  proto::Header e;
  e.opcode = proto::Opcode::error;
  e.status = proto::Status::epoch_mismatch;
  e.rank = h.rank;
  e.round = h.round;
  e.chunk_id = h.chunk_id;
  e.epoch = h.epoch;  // the packet's epoch, as phub-server answers; the job's is in aux
  e.aux = epoch_;
  send(fd, from, e, nullptr, 0, 0);
  return false;
}

void FaultyServer::handle(int fd, uint16_t owner, const std::byte* data, size_t len, const sockaddr_in& from) {
  {
    std::lock_guard<std::mutex> g(restore_mu_);
    if (restore_) {
      start_epoch(restore_->epoch, restore_->first_round);
      holders_[0] = restore_->rank0;
      holder_seen_[0] = restore_->rank0;
      rank0_incarnation_ = restore_->rank0;
      restore_.reset();
    }
  }
  auto h = proto::parse_header(std::span(data, len));
  if (!h || h->job_id != o_.job_id || h->rank >= o_.workers) return;
  if (!o_.secret.empty() &&
      !proto::verify_header(proto::derive_key(o_.secret, o_.job_id), std::span<const std::byte, proto::kHeaderBytes>(data, proto::kHeaderBytes))) {
    return;  // like the real server: a bad tag is dropped silently
  }
  peers_[h->rank] = from;
  peer_known_[h->rank] = true;
  if ((h->flags & proto::flag::retransmit) != 0) ++retransmit_flags_;
  if (h->opcode == proto::Opcode::leave) ++leaves_;
  if (o_.epochs && h->opcode == proto::Opcode::join) return join(fd, *h, from);
  if (o_.epochs && !in_epoch(fd, *h, from)) return;
  if (h->opcode == proto::Opcode::join) {
    // One epoch (0), and every rank is held by whoever joins (the joiner itself); the others are admitted
    // once rank 0 has joined, as on the real server.
    if (h->rank == 0) rank0_incarnation_ = h->aux;
    proto::Header a;
    a.opcode = proto::Opcode::joined;
    a.rank = h->rank;
    a.aux = h->aux;
    a.elem_offset = rank0_incarnation_;
    send(fd, from, a, nullptr, 0, 0);
    return;
  }
  if (h->opcode != proto::Opcode::push && h->opcode != proto::Opcode::rerequest) return;
  if (h->chunk_id >= layout_.chunk_count() || layout_.chunk(h->chunk_id).owner != owner) return;
  const auto& ci = layout_.chunk(h->chunk_id);
  const uint32_t se = layout_.params().segment_elems;
  if (o_.replayed_epoch_error && h->opcode == proto::Opcode::push) {
    proto::Header e;
    e.opcode = proto::Opcode::error;
    e.status = proto::Status::epoch_mismatch;
    e.rank = h->rank;
    e.round = h->round;
    e.chunk_id = h->chunk_id;
    e.epoch = *o_.replayed_epoch_error;
    e.aux = static_cast<uint16_t>(*o_.replayed_epoch_error + 1);
    send(fd, from, e, nullptr, 0, 0);
  }
  if (o_.error_status) {
    proto::Header e;
    e.opcode = proto::Opcode::error;
    e.status = *o_.error_status;
    e.rank = h->rank;
    e.round = h->round;
    e.chunk_id = h->chunk_id;
    e.epoch = h->epoch;
    e.aux = o_.error_aux;
    send(fd, from, e, nullptr, 0, 0);
    return;
  }
  if (h->opcode == proto::Opcode::rerequest) {
    ++rerequests_;
    for (uint32_t s = 0; s < ci.segments; ++s) {
      Segment& sg = segs_[{h->chunk_id, s}];
      if (sg.has_prev && sg.round == h->round + 1) send_result(fd, h->rank, h->chunk_id, h->round, s, sg.prev);
    }
    return;
  }
  ++pushes_;
  if ((h->flags & proto::flag::retransmit) == 0) ++first_pushes_;
  const uint32_t seg = h->elem_offset / se;
  const auto [at, fresh] = segs_.try_emplace({h->chunk_id, seg});
  Segment& sg = at->second;
  if (fresh) sg.round = first_round_;  // a segment first pushed in a restored epoch
  if (h->round + 1 == sg.round && sg.has_prev) return send_result(fd, h->rank, h->chunk_id, h->round, seg, sg.prev);
  if (h->round != sg.round) return;
  if ((sg.contributed >> h->rank) & 1u) return;
  const uint32_t n = h->elem_count;
  if (sg.contributed == 0) sg.acc.assign(n, 0.0f);
  for (uint32_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, data + proto::kHeaderBytes + i * 4, 4);
    sg.acc[i] += v;
  }
  sg.contributed |= uint64_t{1} << h->rank;
  if (sg.contributed != (uint64_t{1} << o_.workers) - 1) return;
  if (o_.mean) {
    for (float& v : sg.acc) v *= 1.0f / static_cast<float>(o_.workers);
  }
  sg.prev = sg.acc;
  sg.has_prev = true;
  sg.contributed = 0;
  const uint32_t done_round = sg.round++;
  for (uint16_t r = 0; r < o_.workers; ++r) {
    if (peer_known_[r]) send_result(fd, r, h->chunk_id, done_round, seg, sg.prev);
  }
}

}  // namespace phub::client::test

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
#include "phub/proto/session_packet.hpp"

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
  true_key_ = proto::derive_key(o_.secret, o_.job_id);
  sessions_.assign(o_.lcores, std::vector<Session>(o_.workers));
  pending_ = sessions_;
  challenges_.assign(o_.lcores, std::vector<Challenge>(o_.workers));
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
  if (o_.interface_map) {
    // The last lcore's home port: 127.0.0.2, same UDP port (its fd is the last in fds_).
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(kInterfaceIpv4);
    a.sin_port = htons(static_cast<uint16_t>(port_base_ + o_.lcores - 1));
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind 127.0.0.2");
    fds_.push_back(fd);
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
        handle(fds_[i], owner_of_fd(fds_[i]), buf.data(), static_cast<size_t>(n), from);
      }
    }
  }
}

uint16_t FaultyServer::owner_of_fd(int fd) const {
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (fds_[i] == fd) return static_cast<uint16_t>(std::min<size_t>(i, o_.lcores - 1u));  // the interface: the last
  }
  return 0;
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
  // As the real server: every result carries its payload's CRC32C (which the header's tag covers).
  if (h.opcode == proto::Opcode::result && !o_.unprotected_results) h.flags |= proto::flag::crc;
  auto len = proto::build_message(h, span, out);
  if (!len) return;
  out.resize(*len);
  if (o_.sessions) {
    // As the real server: every answer to a rank of a sessions job goes under its session, none without one.
    Session& s = sessions_[owner_of_fd(fd)][h.rank];
    if (!s.active) return;
    if (pending_[owner_of_fd(fd)][h.rank].active) ++sealed_while_pending_;
    proto::seal_session_packet(proto::server_to_worker(s.keys), out, s.reply, s.next_tx_seq++,
                               o_.payload_mac && h.opcode == proto::Opcode::result);
  } else if (!o_.secret.empty()) {
    proto::sign_header(key_, std::span<std::byte, proto::kHeaderBytes>(out.data(), proto::kHeaderBytes));
  }
  if (h.opcode == proto::Opcode::error) ++errors_sent_;
  emit(fd, to, h.opcode, h.rank, std::move(out));
}

// CRC32C is affine in its input: crc(p ^ d) = crc(p) ^ L(d) for a linear L. Of the 40 single-bit changes of
// the payload's first 5 bytes, some nonzero sum has L = 0 (40 vectors in a 32-bit space), found by Gaussian
// elimination over GF(2); applying it changes the payload and leaves its CRC32C as it was.
void FaultyServer::alter_keeping_crc(std::span<std::byte> payload) {
  constexpr int kBits = 40;
  if (payload.size() < kBits / 8) return;
  const uint32_t base = proto::crc32c(payload);
  std::array<std::pair<uint32_t, uint64_t>, 32> pivot{};  // by leading bit: (L value, which bits summed)
  for (int i = 0; i < kBits; ++i) {
    payload[static_cast<size_t>(i / 8)] ^= std::byte{static_cast<uint8_t>(1u << (i % 8))};
    uint32_t v = proto::crc32c(payload) ^ base;
    payload[static_cast<size_t>(i / 8)] ^= std::byte{static_cast<uint8_t>(1u << (i % 8))};
    uint64_t mask = uint64_t{1} << i;
    for (int b = 31; b >= 0 && v != 0; --b) {
      if ((v >> b & 1u) == 0) continue;
      if (pivot[static_cast<size_t>(b)].second == 0) {
        pivot[static_cast<size_t>(b)] = {v, mask};
        v = 0;
        mask = 0;
        break;
      }
      v ^= pivot[static_cast<size_t>(b)].first;
      mask ^= pivot[static_cast<size_t>(b)].second;
    }
    if (mask == 0) continue;  // became a pivot
    for (int k = 0; k < kBits; ++k) {  // v == 0: these bits together leave the CRC as it is
      if ((mask >> k & 1u) != 0) payload[static_cast<size_t>(k / 8)] ^= std::byte{static_cast<uint8_t>(1u << (k % 8))};
    }
    return;
  }
}

void FaultyServer::emit(int fd, const sockaddr_in& to, proto::Opcode op, uint16_t rank, std::vector<std::byte> out) {
  const bool result = op == proto::Opcode::result;
  const bool error = op == proto::Opcode::error;
  if (result && o_.corrupt_every != 0 && ++results_sent_ % o_.corrupt_every == 0 && out.size() > proto::kHeaderBytes) {
    // After sealing: on the way, as an attacker would.
    if (o_.corrupt_keeps_crc) alter_keeping_crc(std::span(out).subspan(proto::kHeaderBytes));
    else out[proto::kHeaderBytes] ^= std::byte{0x01};
    ++corrupted_;
  }
  if (result && o_.silent_after_results != 0 && ++results_counted_ == o_.silent_after_results) {
    silent_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.silent_ms);
  }
  const auto raw = [&](const std::vector<std::byte>& b) {
    (void)sendto(fd, b.data(), b.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  };
  if (o_.replay_first && (result || error)) {
    auto& first = result ? first_result_ : first_error_;
    first.try_emplace({fd, rank}, out);
  }
  if (result && o_.hold_every != 0 && ++results_ % o_.hold_every == 0) {
    held_.push_back(Held{fd, to, std::move(out), std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.hold_ms)});
    return;
  }
  const int copies = (o_.duplicate_results && result) || (o_.duplicate_errors && error) ? 2 : 1;
  for (int i = 0; i < copies; ++i) raw(out);
  if (o_.replay_first && result) {
    for (auto* first : {&first_result_, &first_error_}) {
      auto at = first->find({fd, rank});
      if (at != first->end() && at->second != out) raw(at->second);
    }
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

bool FaultyServer::confirms(uint16_t owner, const proto::Header& h, const proto::JoinPayload& jp) const {
  if (!jp.confirm || h.aux == 0) return false;
  const Challenge& c = challenges_[owner][h.rank];
  if (c.active && c.epoch == epoch_ && c.worker_nonce == jp.worker_nonce && c.server_nonce == jp.server_nonce) return true;
  for (const Session* s : {&sessions_[owner][h.rank], &pending_[owner][h.rank]}) {
    if (s->active && s->worker_nonce == jp.worker_nonce && s->server_nonce == jp.server_nonce) return true;
  }
  return false;
}

void FaultyServer::join(int fd, const proto::Header& h, const proto::JoinPayload& jp, const sockaddr_in& from) {
  const bool valid = confirms(owner_of_fd(fd), h, jp);
  if (valid && (h.flags & proto::flag::epoch_start) != 0 && h.rank == 0 &&
      h.epoch == static_cast<uint16_t>(epoch_ + 1) && holders_[0] != h.aux) {
    start_epoch(h.epoch, 0);
    holders_[0] = h.aux;
  } else if (valid && (h.flags & proto::flag::epoch_start) == 0 && holders_[h.rank] == 0) {
    holders_[h.rank] = h.aux;
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
  answer_join(fd, h, jp, from, a, valid && holders_[h.rank] == h.aux);
}

void FaultyServer::answer_join(int fd, const proto::Header& h, const proto::JoinPayload& jp, const sockaddr_in& from,
                               proto::Header a, bool confirmed) {
  if (o_.mute) return;
  const uint16_t owner = owner_of_fd(fd);
  if (o_.interface_map && owner == o_.lcores - 1) a.chunk_id = kInterfaceIpv4;  // the chunk-to-interface map
  proto::JoinedPayload p;
  p.worker_nonce = jp.worker_nonce;
  p.reply = proto::ReplyAddress{ntohl(from.sin_addr.s_addr), ntohs(from.sin_port)};
  if (!confirmed) {
    p.server_nonce = proto::draw_session_nonce();
    challenges_[owner][h.rank] = Challenge{true, jp.worker_nonce, p.server_nonce, epoch_};
  } else {
    p.server_nonce = jp.server_nonce;
    p.options = proto::session_option::confirmed;
  }
  if (o_.sessions) {
    p.options |= proto::session_option::session | (o_.payload_mac ? proto::session_option::payload_mac : 0);
    Session& current = sessions_[owner][h.rank];
    Session& pending = pending_[owner][h.rank];
    if (confirmed) {
      // The holder's confirm: a resend (the nonces of a session it made) changes nothing; another makes a new
      // session (pending while the rank has one, with switch_on_first_packet).
      const auto made = [&](const Session& s) {
        return s.active && s.worker_nonce == jp.worker_nonce && s.server_nonce == jp.server_nonce;
      };
      if (!made(pending) && !made(current)) {
        Session& s = o_.switch_on_first_packet && current.active ? pending : current;
        s = Session{};
        s.active = true;
        s.worker_nonce = jp.worker_nonce;
        s.server_nonce = jp.server_nonce;
        s.reply = p.reply;
        s.keys = proto::derive_session_keys(true_key_, proto::SessionContext{h.rank, h.aux, owner, jp.worker_nonce,
                                                                            jp.server_nonce});
        ++sessions_made_;
      }
    }
  }
  a.job_id = o_.job_id;
  a.seq = seq_++;
  std::array<std::byte, proto::kJoinedPayloadBytes> payload{};
  proto::write_joined_payload(p, payload);
  std::vector<std::byte> out(proto::kHeaderBytes + payload.size());
  auto len = proto::build_message(a, payload, out);
  if (!len) return;
  out.resize(*len);
  if (!o_.secret.empty()) {
    proto::seal_handshake(proto::handshake_key(key_), std::span<std::byte, proto::kHeaderBytes>(out.data(), proto::kHeaderBytes),
                          payload);
  }
  emit(fd, from, a.opcode, a.rank, std::move(out));
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
      if (o_.sessions) {  // a restart keeps none
        sessions_.assign(o_.lcores, std::vector<Session>(o_.workers));
        pending_ = sessions_;
      }
      challenges_.assign(o_.lcores, std::vector<Challenge>(o_.workers));  // a new run's challenges
      restore_.reset();
    }
  }
  auto h = proto::parse_header(std::span(data, len));
  if (!h || h->job_id != o_.job_id || h->rank >= o_.workers) return;
  const auto msg = std::span<const std::byte>(data, proto::kHeaderBytes + h->payload_bytes);
  const auto wire = msg.first<proto::kHeaderBytes>();
  // Like the real server: whatever fails its check is dropped silently.
  std::optional<proto::JoinPayload> jp;
  if (h->opcode == proto::Opcode::join) {
    jp = o_.secret.empty() ? proto::parse_join_payload(msg.subspan(proto::kHeaderBytes))
                           : proto::accept_join(proto::handshake_key(true_key_), wire, msg.subspan(proto::kHeaderBytes));
    if (!jp) return;
  } else if (o_.sessions) {
    const bool elements = h->opcode == proto::Opcode::push || h->opcode == proto::Opcode::init;
    const auto opens = [&](Session& s) {
      return s.active && proto::open_session_packet(proto::worker_to_server(s.keys), s.rx, msg, s.reply,
                                                    o_.payload_mac && elements) == proto::SessionVerdict::ok;
    };
    Session& pending = pending_[owner][h->rank];
    if (!opens(sessions_[owner][h->rank])) {
      if (!opens(pending)) {
        ++session_drops_;
        return;
      }
      sessions_[owner][h->rank] = pending;  // the first packet under the pending session: it is the rank's now
      pending = Session{};
    }
  } else if (!o_.secret.empty() && !proto::verify_header(true_key_, wire)) {
    return;
  }
  // Silent: the packet opened its session (a rejoin's session is taken up, as on a server whose answers are
  // late), but only joins get anything done.
  if (o_.silent_after_results != 0 && h->opcode != proto::Opcode::join &&
      std::chrono::steady_clock::now() < silent_until_) {
    return;
  }
  peers_[h->rank] = from;
  peer_known_[h->rank] = true;
  if ((h->flags & proto::flag::retransmit) != 0) ++retransmit_flags_;
  if (h->opcode == proto::Opcode::leave) ++leaves_;
  if (o_.epochs && h->opcode == proto::Opcode::join) return join(fd, *h, *jp, from);
  if (o_.epochs && !in_epoch(fd, *h, from)) return;
  if (h->opcode == proto::Opcode::join) {
    // One epoch (0), and every rank is held by whoever confirms (the joiner itself); the others are admitted
    // once rank 0 has joined, as on the real server.
    const bool valid = confirms(owner, *h, *jp);
    if (h->rank == 0 && valid) rank0_incarnation_ = h->aux;
    proto::Header a;
    a.opcode = proto::Opcode::joined;
    a.rank = h->rank;
    a.aux = h->aux;
    a.elem_offset = rank0_incarnation_;
    answer_join(fd, *h, *jp, from, a, valid);
    return;
  }
  if (h->opcode != proto::Opcode::push && h->opcode != proto::Opcode::rerequest) return;
  if (h->chunk_id >= layout_.chunk_count() || layout_.chunk(h->chunk_id).owner != owner) return;
  const auto& ci = layout_.chunk(h->chunk_id);
  const uint32_t se = layout_.params().segment_elems;
  if (o_.forge_errors && h->opcode == proto::Opcode::push) {
    // What someone without the session keys can send: a draining error for the very chunk and round, which
    // would end the operation if taken. Once under the job key, once under keys of another server nonce.
    proto::Header e;
    e.opcode = proto::Opcode::error;
    e.status = proto::Status::draining;
    e.job_id = o_.job_id;
    e.rank = h->rank;
    e.round = h->round;
    e.chunk_id = h->chunk_id;
    e.epoch = h->epoch;
    std::vector<std::byte> out(proto::kHeaderBytes);
    if (proto::build_message(e, {}, out)) {
      auto w = std::span<std::byte, proto::kHeaderBytes>(out.data(), proto::kHeaderBytes);
      std::vector<std::byte> other = out;
      proto::sign_header(true_key_, w);
      (void)sendto(fd, out.data(), out.size(), 0, reinterpret_cast<const sockaddr*>(&from), sizeof from);
      const Session& s = sessions_[owner][h->rank];
      const auto keys = proto::derive_session_keys(
          true_key_, proto::SessionContext{h->rank, 1, owner, s.worker_nonce, proto::draw_session_nonce()});
      proto::seal_session_packet(proto::server_to_worker(keys), other, s.reply, s.next_tx_seq, false);
      (void)sendto(fd, other.data(), other.size(), 0, reinterpret_cast<const sockaddr*>(&from), sizeof from);
    }
  }
  if (o_.stall_errors && h->opcode == proto::Opcode::push && (h->flags & proto::flag::retransmit) == 0) {
    proto::Header e;
    e.opcode = proto::Opcode::error;
    e.status = proto::Status::round_stalled;
    e.rank = h->rank;
    e.round = h->round;
    e.chunk_id = h->chunk_id;
    e.epoch = h->epoch;
    e.aux = h->rank;
    send(fd, from, e, nullptr, 0, 0);
  }
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
  if (o_.interface_map && owner == o_.lcores - 1) ++(fd == fds_.back() ? pushes_at_interface_ : pushes_off_interface_);
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

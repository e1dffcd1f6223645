// The emulated workers' session handshake, on the control thread before the lcores run.
#include "worker_sessions.hpp"

#include <rte_mbuf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "lcore.hpp"  // now_ns
#include "phub/base/bytes.hpp"
#include "phub/drivers/arp_mbuf.hpp"
#include "phub/gen/push_frame.hpp"
#include "phub/gen/workload.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/handshake.hpp"

namespace phub::pktgen {
namespace {

constexpr uint64_t kResendNs = 20'000'000;  // a join unanswered for 20 ms goes again (the same nonce)
constexpr size_t kOutstanding = 64;         // handshakes in flight at once: the server answers joins at a bounded rate
constexpr size_t kL234 = proto::kFrameHeadersBytes - proto::kHeaderBytes;

// One rank's handshake with one server lcore.
struct Attempt {
  uint16_t rank = 0;
  uint16_t owner = 0;
  bool start = false;  // rank 0: its confirm starts the epoch after the lcore's current one
  uint16_t epoch = 0;  // the header's epoch: the one to start, or the one to join
  proto::SessionNonce nonce{};
  bool challenged = false;
  proto::SessionNonce challenge{};
  uint32_t seq = 1;
  uint64_t next_send_ns = 0;
  bool done = false;
  std::string last = "no answer";  // what the server answered last, for the error
};

class Handshakes {
 public:
  Handshakes(const HandshakePort& p, gen::Workload& wl, const gen::WorkerAddrs& addrs, JobSessions& out)
      : p_(p), wl_(wl), addrs_(addrs), out_(out), hs_key_(proto::handshake_key(wl.key())) {
    incarnations_.resize(wl.spec().workers);
    for (uint32_t& inc : incarnations_) {
      while (inc == 0) {
        const proto::SessionNonce r = proto::draw_session_nonce();
        std::memcpy(&inc, r.data(), sizeof inc);
      }
    }
  }

  // Run the handshakes of `ranks` with every server lcore driven, at most kOutstanding at once, until all are
  // done.
  Expected<void, std::string> run(uint16_t first_rank, uint16_t end_rank, uint64_t deadline_ns) {
    std::vector<Attempt> all;
    for (uint16_t r = first_rank; r < end_rank; ++r) {
      for (uint16_t o = 0; o < wl_.spec().server_lcores; ++o) {
        if (p_.owner_queue[o] == kNotDriven) continue;
        Attempt a;
        a.rank = r;
        a.owner = o;
        a.start = r == 0;
        a.epoch = a.start ? 1 : wl_.epoch(o);  // rank 0 guesses a fresh server's epoch 0; the challenge tells
        a.nonce = proto::draw_session_nonce();
        all.push_back(a);
      }
    }
    for (size_t begin = 0; begin < all.size(); begin += kOutstanding) {
      const std::span<Attempt> batch(all.data() + begin, std::min(kOutstanding, all.size() - begin));
      while (std::any_of(batch.begin(), batch.end(), [](const Attempt& a) { return !a.done; })) {
        const uint64_t now = now_ns();
        if (now > deadline_ns) {
          const Attempt& a = *std::find_if(batch.begin(), batch.end(), [](const Attempt& x) { return !x.done; });
          return unexpected("job " + std::to_string(wl_.spec().id) + ": rank " + std::to_string(a.rank) +
                            " did not join server lcore " + std::to_string(a.owner) + " (UDP port " +
                            std::to_string(wl_.spec().port_base + a.owner) + "): " + a.last);
        }
        for (Attempt& a : batch) {
          if (!a.done && a.next_send_ns <= now) send(a, now);
        }
        if (auto r = poll(batch, now); !r) return r;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    return {};
  }

 private:
  void send(Attempt& a, uint64_t now) {
    a.next_send_ns = now + kResendNs;
    rte_mbuf* m = rte_pktmbuf_alloc(p_.pool);
    if (m == nullptr) return;
    auto* buf = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, proto::kFrameHeadersBytes + proto::kJoinPayloadBytes));
    if (buf == nullptr) {
      rte_pktmbuf_free(m);
      return;
    }
    std::array<std::byte, proto::kJoinPayloadBytes> payload{};
    proto::write_join_payload(proto::JoinPayload{a.nonce, a.challenged, a.challenge}, payload);
    proto::Header h;
    h.opcode = proto::Opcode::join;
    h.flags = a.start ? proto::flag::epoch_start : 0;
    h.dtype = wl_.spec().dtype;
    h.job_id = wl_.spec().id;
    h.rank = a.rank;
    h.epoch = a.epoch;
    h.aux = incarnations_[a.rank];
    h.seq = a.seq++;  // a later confirm of this process must carry a later number
    h.payload_bytes = static_cast<uint16_t>(payload.size());
    const std::span<std::byte> frame(buf, m->data_len);
    if (!proto::build_phub_frame(addrs_.flow(a.rank, static_cast<uint16_t>(wl_.spec().port_base + a.owner)), h,
                                 payload, frame)) {
      rte_pktmbuf_free(m);
      return;
    }
    proto::seal_handshake(hs_key_, frame.subspan(kL234).first<proto::kHeaderBytes>(), payload);
    proto::refresh_udp_checksum(frame);  // the tag changed bytes the checksum covers
    if (p_.port->tx(p_.owner_queue[a.owner], &m, 1) != 1) rte_pktmbuf_free(m);
  }

  Expected<void, std::string> poll(std::span<Attempt> batch, uint64_t now) {
    constexpr uint16_t kBurst = 32;
    rte_mbuf* pkts[kBurst];
    for (uint16_t q = 0; q < p_.queues; ++q) {
      const uint16_t n = p_.port->rx(q, pkts, kBurst);
      for (uint16_t i = 0; i < n; ++i) {
        auto r = take(pkts[i], batch, now);
        rte_pktmbuf_free(pkts[i]);
        if (!r) {
          for (uint16_t k = static_cast<uint16_t>(i + 1); k < n; ++k) rte_pktmbuf_free(pkts[k]);
          return r;
        }
      }
    }
    return {};
  }

  void answer_arp(rte_mbuf* m) {
    const auto arp = drivers::arp_of(m);
    if (!arp || arp->op != proto::ArpOp::request) return;
    if (!addrs_.is_rank_ip(arp->target_ip, wl_.spec().workers)) return;
    rte_mbuf* reply = drivers::alloc_arp_reply(p_.pool, *arp, addrs_.src_mac, arp->target_ip);
    if (reply != nullptr && p_.port->tx(0, &reply, 1) != 1) rte_pktmbuf_free(reply);
  }

  Expected<void, std::string> take(rte_mbuf* m, std::span<Attempt> batch, uint64_t now) {
    if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) return {};
    const std::span<const std::byte> frame(rte_pktmbuf_mtod(m, const std::byte*), m->data_len);
    auto f = proto::parse_phub_frame(frame);
    if (!f) {
      if (frame.size() >= proto::kEthBytes && frame[12] == std::byte{0x08} && frame[13] == std::byte{0x06}) answer_arp(m);
      return {};
    }
    const proto::Header& h = f->hdr;
    if (h.job_id != wl_.spec().id || f->udp.src_port < wl_.spec().port_base) return {};
    const auto owner = static_cast<uint16_t>(f->udp.src_port - wl_.spec().port_base);
    auto it = std::find_if(batch.begin(), batch.end(),
                           [&](const Attempt& a) { return !a.done && a.rank == h.rank && a.owner == owner; });
    if (it == batch.end()) return {};
    Attempt& a = *it;
    if (h.opcode == proto::Opcode::error) {
      a.last = "error " + std::string(proto::status_name(h.status)) + " (aux " + std::to_string(h.aux) + ")";
      return {};
    }
    if (h.opcode != proto::Opcode::joined) return {};
    const auto wire = frame.subspan(f->udp.payload_offset).first<proto::kHeaderBytes>();
    const auto p = proto::accept_joined(hs_key_, wire, f->payload, a.nonce);
    if (!p) {
      a.last = "a joined that does not verify under the job's secret (is it the server's?)";
      return {};
    }
    if ((p->options & proto::session_option::session) == 0) {
      return unexpected("job " + std::to_string(wl_.spec().id) + ": the server runs it without sessions, but "
                        "phub-pktgen was told it runs them: give both the same config");
    }
    const uint32_t mine = incarnations_[a.rank];
    if ((p->options & proto::session_option::confirmed) == 0) {
      // The challenge of now: confirm it (rank 0 names the epoch after the lcore's current one, unless its
      // earlier confirm started that already).
      a.challenged = true;
      a.challenge = p->server_nonce;
      if (a.start && h.aux != mine) a.epoch = static_cast<uint16_t>(h.epoch + 1);
      a.last = "challenged in epoch " + std::to_string(h.epoch) + " (rank held by incarnation " + std::to_string(h.aux) + ")";
      send(a, now);
      return {};
    }
    if (!a.challenged || p->server_nonce != a.challenge) return {};  // answers an earlier confirm of this attempt
    if (h.aux != mine) {
      a.last = "the rank is held by another process (incarnation " + std::to_string(h.aux) + ") in epoch " +
               std::to_string(h.epoch);
      a.challenged = false;
      return {};
    }
    if (!a.start && h.epoch != wl_.epoch(owner)) {
      a.last = "joined epoch " + std::to_string(h.epoch) + ", not rank 0's " + std::to_string(wl_.epoch(owner));
      a.challenged = false;
      a.epoch = wl_.epoch(owner);
      return {};
    }
    if (h.round != 0) {
      return unexpected("job " + std::to_string(wl_.spec().id) + ": server lcore " + std::to_string(owner) +
                        " starts the epoch at round " + std::to_string(h.round) +
                        " (a job restored from a checkpoint); phub-pktgen's workers start at round 0");
    }
    if (a.start) wl_.set_epoch(owner, h.epoch);
    proto::SessionContext ctx;
    ctx.rank = a.rank;
    ctx.incarnation = mine;
    ctx.lcore_index = owner;
    ctx.worker_nonce = p->worker_nonce;
    ctx.server_nonce = p->server_nonce;
    WorkerSession& s = out_.at(a.rank, owner);
    s = WorkerSession{};
    s.keys = proto::derive_session_keys(wl_.key(), ctx);
    s.reply = p->reply;
    s.payload_mac = (p->options & proto::session_option::payload_mac) != 0;
    a.done = true;
    return {};
  }

  const HandshakePort& p_;
  gen::Workload& wl_;
  const gen::WorkerAddrs& addrs_;
  JobSessions& out_;
  proto::AuthKey hs_key_;
  std::vector<uint32_t> incarnations_;  // by rank: this process's worker incarnations
};

}  // namespace

Expected<void, std::string> join_sessions(const HandshakePort& p, gen::Workload& wl, const gen::WorkerAddrs& addrs,
                                          JobSessions& out, double timeout_s) {
  if (!wl.authenticated() || !wl.spec().sessions) return {};
  Handshakes hs(p, wl, addrs, out);
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_s * 1e9);
  // Rank 0 first: the other ranks join the epoch it starts.
  if (auto r = hs.run(0, 1, deadline); !r) return r;
  return hs.run(1, wl.spec().workers, deadline);
}

}  // namespace phub::pktgen

// Test harness implementation (see harness.hpp).
#include "harness.hpp"

#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/session.hpp"

namespace phub::test {
namespace {

int g_serial = 0;

}  // namespace

RingLink::RingLink(uint16_t queues) {
  const int id = g_serial++;
  for (uint16_t q = 0; q < queues; ++q) {
    const std::string a = "t2s" + std::to_string(id) + "_" + std::to_string(q);
    const std::string b = "t2w" + std::to_string(id) + "_" + std::to_string(q);
    to_server_.push_back(rte_ring_create(a.c_str(), 4096, 0, RING_F_SP_ENQ | RING_F_SC_DEQ));
    to_worker_.push_back(rte_ring_create(b.c_str(), 4096, 0, RING_F_SP_ENQ | RING_F_SC_DEQ));
    if (to_server_.back() == nullptr || to_worker_.back() == nullptr) throw std::runtime_error("ring create");
  }
  server_name_ = "srv" + std::to_string(id);
  worker_name_ = "wrk" + std::to_string(id);
  if (rte_eth_from_rings(server_name_.c_str(), to_server_.data(), queues, to_worker_.data(), queues, 0) < 0 ||
      rte_eth_from_rings(worker_name_.c_str(), to_worker_.data(), queues, to_server_.data(), queues, 0) < 0) {
    throw std::runtime_error("rte_eth_from_rings");
  }
  // The ring PMD registers its ports under "net_ring_<name>".
  server_name_ = "net_ring_" + server_name_;
  worker_name_ = "net_ring_" + worker_name_;
}

RingLink::~RingLink() {
  for (auto* r : to_server_) rte_ring_free(r);
  for (auto* r : to_worker_) rte_ring_free(r);
}

proto::Header push_header(const proto::Layout& l, uint32_t chunk, uint32_t seg, uint32_t round, uint16_t rank,
                          Dtype d) {
  proto::Header h;
  h.opcode = proto::Opcode::push;
  h.dtype = d;
  h.rank = rank;
  h.round = round;
  h.chunk_id = chunk;
  h.elem_offset = l.segment_offset(seg);
  h.elem_count = static_cast<uint16_t>(l.segment_count_elems(l.chunk(chunk), seg));
  return h;
}

config::Job make_job(uint32_t id, uint16_t workers, std::vector<uint64_t> key_elems, Dtype d) {
  config::Job j;
  j.id = id;
  j.name = "job" + std::to_string(id);
  j.workers = workers;
  j.dtype = d;
  j.port_base = static_cast<uint16_t>(40000 + 100 * id);
  j.quota_bytes = 1ull << 30;
  for (size_t k = 0; k < key_elems.size(); ++k) j.keys.push_back({"k" + std::to_string(k), key_elems[k]});
  return j;
}

config::Config make_config(const std::string& device, uint16_t lcores, std::vector<config::Job> jobs) {
  config::Config c;
  config::Port p;
  p.name = "p0";
  p.device = device;
  p.ipv4 = {kServerIp, 24};
  p.steering = config::Steering::ring;
  p.rx_desc = 512;
  p.tx_desc = 512;
  c.ports.push_back(p);
  for (uint16_t i = 0; i < lcores; ++i) c.lcores.push_back({static_cast<unsigned>(i + 1), {}});
  c.polling = {100, 20};
  c.jobs = std::move(jobs);
  c.limits.mbufs = 8191;
  c.limits.ring_entries = 1024;
  c.timeouts.round_stall_ms = 300;
  return c;
}

Workers::Workers(const std::string& device, uint16_t queues, const engine::Engine& server, uint16_t server_port)
    : queues_(queues) {
  static int pools = 0;
  auto pool = drivers::Mempool::create("twrk" + std::to_string(pools++), 8191, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  if (!pool) throw std::runtime_error(pool.error());
  pool_ = std::move(*pool);
  drivers::PortSpec spec;
  spec.devargs = device;
  spec.rx_queues = queues;
  spec.tx_queues = queues;
  spec.rx_pool = pool_.get();
  auto port = drivers::EthPort::open(spec);
  if (!port) throw std::runtime_error(port.error());
  port_ = std::move(*port);
  server_mac_ = server.snapshot().ports[server_port].mac;
  server_ip_ = server.snapshot().ports[server_port].ipv4;
}

proto::FlowAddrs Workers::addrs(uint16_t rank, uint16_t server_udp_port) const {
  proto::FlowAddrs a;
  a.src_mac = {0x02, 0x77, 0, 0, static_cast<uint8_t>(rank >> 8), static_cast<uint8_t>(rank)};
  a.dst_mac = server_mac_;
  a.src_ip = server_ip_ + 100 + ip_shift + rank;
  a.dst_ip = server_ip_;
  a.src_port = static_cast<uint16_t>(50000 + udp_port_shift + rank);
  a.dst_port = server_udp_port;
  return a;
}

void Workers::send_frame(const std::vector<std::byte>& frame, uint16_t q, uint64_t ol_flags) {
  if (record != nullptr) record->push_back(frame);
  // The server frees what it took back into this pool as it gets to it: a flood faster than a loaded server waits
  // for mbufs to come back (as a NIC's ring would wait), and fails only when none does for seconds.
  rte_mbuf* m = rte_pktmbuf_alloc(pool_.get());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (m == nullptr && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    m = rte_pktmbuf_alloc(pool_.get());
  }
  ASSERT_NE(m, nullptr);
  m->ol_flags |= ol_flags;
  auto* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
  ASSERT_NE(p, nullptr);
  std::memcpy(p, frame.data(), frame.size());
  while (port_.tx(q, &m, 1) != 1) std::this_thread::yield();
}

const proto::Layout& Workers::layout(const config::Job& job, uint16_t lcores, uint16_t mtu) {
  auto it = layouts_.find(job.id);
  if (it == layouts_.end()) {
    proto::LayoutParams p;
    for (const auto& k : job.keys) p.key_elems.push_back(k.elems);
    p.chunk_elems = job.chunk_bytes / 4;
    p.owners = lcores;
    p.segment_elems = proto::job_segment_elems(mtu, job.dtype, job.mode == config::JobMode::ps);
    it = layouts_.emplace(job.id, *proto::Layout::build(p)).first;
  }
  return it->second;
}

std::vector<std::byte> join_payload(uint32_t job_id, uint16_t rank, uint32_t incarnation, uint32_t seq) {
  proto::JoinPayload p;  // a first join: no challenge yet
  const uint32_t words[4] = {job_id, rank, incarnation, seq};
  for (size_t i = 0; i < p.worker_nonce.size(); ++i) {
    p.worker_nonce[i] = static_cast<std::byte>((words[i / 4] >> (8 * (i % 4))) ^ (0x5a + i));  // never all zero
  }
  std::vector<std::byte> out(proto::kJoinPayloadBytes);
  proto::write_join_payload(p, std::span<std::byte, proto::kJoinPayloadBytes>(out.data(), out.size()));
  return out;
}

void Workers::send(const config::Job& job, uint16_t rank, proto::Header h, const std::vector<std::byte>& payload,
                   const std::string& secret_override) {
  const std::string& secret = secret_override == "\x01" ? job.secret : secret_override;
  const uint32_t job_id = h.job_id == 0 ? job.id : h.job_id;
  const auto seal = [&](std::span<std::byte> msg) {
    if (secret.empty()) return;
    const auto wire = msg.first<proto::kHeaderBytes>();
    if (static_cast<proto::Opcode>(std::to_integer<uint8_t>(msg[3])) == proto::Opcode::join) {
      proto::seal_handshake(proto::handshake_key(proto::derive_key(secret, job_id)), wire, msg.subspan(proto::kHeaderBytes));
    } else {
      proto::sign_header(proto::derive_key(secret, job_id), wire);
    }
  };
  // A question (incarnation 0) is never confirmed.
  if (h.opcode != proto::Opcode::join || !payload.empty() || h.aux == 0) return send_sealed(job, rank, h, payload, seal);
  // A client's handshake: the first join, its challenge, the confirm.
  const bool given_seq = h.seq != 0;
  if (!given_seq) h.seq = ++last_seq_;
  const std::vector<std::byte> first = join_payload(job_id, rank, h.aux, h.seq);
  send_sealed(job, rank, h, first, seal);
  const auto& l = layouts_.at(job.id);
  const uint16_t owner = h.chunk_id < l.chunk_count() ? l.chunk(h.chunk_id).owner : 0;
  std::optional<proto::JoinedPayload> challenge;
  bool refused = false;  // the join was answered with an error: nothing to confirm
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
  while (!challenge && !refused && std::chrono::steady_clock::now() < deadline) {
    for (Received& r : receive(1, std::chrono::milliseconds(50))) {
      const bool answer = r.hdr.job_id == job_id && r.hdr.rank == rank && r.src_port == job.port_base + owner;
      if (!challenge && answer && r.hdr.opcode == proto::Opcode::joined) {
        challenge = proto::parse_joined_payload(r.payload);
        if (challenge) continue;
      }
      refused = refused || (answer && r.hdr.opcode == proto::Opcode::error);
      held_.push_back(std::move(r));
    }
  }
  if (!challenge) return;  // refused (a wrong secret, a bad rank ...): the test sees what came, or nothing
  proto::JoinPayload confirm = *proto::parse_join_payload(first);
  confirm.confirm = true;
  confirm.server_nonce = challenge->server_nonce;
  std::vector<std::byte> body(proto::kJoinPayloadBytes);
  proto::write_join_payload(confirm, std::span<std::byte, proto::kJoinPayloadBytes>(body.data(), body.size()));
  if (!given_seq) h.seq = 0;
  send_sealed(job, rank, h, body, seal);
}

void Workers::send_sealed(const config::Job& job, uint16_t rank, proto::Header h, const std::vector<std::byte>& given,
                          const std::function<void(std::span<std::byte>)>& seal) {
  const auto& l = layouts_.at(job.id);
  const uint16_t owner = h.chunk_id < l.chunk_count() ? l.chunk(h.chunk_id).owner : 0;
  h.job_id = h.job_id == 0 ? job.id : h.job_id;
  if (h.seq == 0) h.seq = ++last_seq_;  // as a client numbers its packets (a test replaying one gives its seq)
  const proto::FlowAddrs a = addrs(rank, static_cast<uint16_t>(job.port_base + owner));
  if (proto::opcode_carries_cookie(h.opcode) && h.aux == 0) {
    auto it = cookies_.find({h.job_id, rank, a.src_ip, a.src_port});
    if (it != cookies_.end()) h.aux = it->second;
  }
  const std::vector<std::byte> payload =
      h.opcode == proto::Opcode::join && given.empty() ? join_payload(h.job_id, rank, h.aux, h.seq) : given;
  std::vector<std::byte> frame(proto::kFrameHeadersBytes + payload.size());
  auto n = proto::build_phub_frame(a, h, payload, frame);
  ASSERT_TRUE(n.has_value());
  seal(std::span(frame).subspan(proto::kFrameHeadersBytes - proto::kHeaderBytes));
  proto::refresh_udp_checksum(frame);  // the tag changed bytes under the UDP checksum
  send_frame(frame, queue_override >= 0 ? static_cast<uint16_t>(queue_override) : owner % queues_);
}

void Workers::prove(const config::Job& job, uint16_t rank) {
  proto::Header h;
  h.opcode = proto::Opcode::join;
  h.rank = rank;
  h.aux = 1000u + rank;
  send(job, rank, h, {});
  const auto got = receive(1);
  if (got.size() != 1 || got[0].hdr.opcode != proto::Opcode::joined || got[0].hdr.crc32c == 0) {
    throw std::runtime_error("prove: no joined answer with a cookie");
  }
}

std::vector<Received> Workers::receive(size_t count, std::chrono::milliseconds timeout) {
  std::vector<Received> out;
  while (!held_.empty() && out.size() < count) {
    out.push_back(std::move(held_.front()));
    held_.pop_front();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  rte_mbuf* pkts[32];
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (uint16_t q = 0; q < queues_; ++q) {
      const uint16_t n = port_.rx(q, pkts, 32);
      any = any || n != 0;
      for (uint16_t i = 0; i < n; ++i) {
        std::vector<std::byte> frame(pkts[i]->pkt_len);
        const void* data = rte_pktmbuf_read(pkts[i], 0, pkts[i]->pkt_len, frame.data());
        if (data != frame.data()) std::memcpy(frame.data(), data, frame.size());
        rte_pktmbuf_free(pkts[i]);
        auto f = proto::parse_phub_frame(frame);
        if (!f) {
          other.push_back(std::move(frame));
          continue;
        }
        if (f->hdr.opcode == proto::Opcode::joined && f->hdr.crc32c != 0) {
          cookies_[{f->hdr.job_id, f->hdr.rank, f->ip.dst, f->udp.dst_port}] = f->hdr.crc32c;
        }
        Received r;
        r.hdr = f->hdr;
        r.payload.assign(f->payload.begin(), f->payload.end());
        r.dst_port = f->udp.dst_port;
        r.dst_ip = f->ip.dst;
        r.src_port = f->udp.src_port;
        r.udp_checksum = load_be<uint16_t>(frame.data() + f->ip.l4_offset + 6);
        r.udp_checksum_ok = proto::udp_checksum_ok(frame, f->ip);
        r.msg.assign(frame.begin() + static_cast<std::ptrdiff_t>(f->udp.payload_offset),
                     frame.begin() + static_cast<std::ptrdiff_t>(f->udp.payload_offset + f->udp.payload_bytes));
        out.push_back(std::move(r));
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return out;
}

std::unique_ptr<engine::Engine> start_engine(const config::Config& cfg) {
  auto created = engine::Engine::create(cfg);
  if (!created) throw std::runtime_error(created.error());
  auto started = (*created)->start();
  if (!started) throw std::runtime_error(started.error());
  return std::move(*created);
}

StartedEngine::StartedEngine(uint16_t lcores, std::vector<config::Job> jobs,
                             const std::function<void(config::Config&)>& tweak)
    : link(lcores) {
  cfg = make_config(link.server_name(), lcores, std::move(jobs));
  if (tweak) tweak(cfg);
  engine = start_engine(cfg);
  workers = std::make_unique<Workers>(link.worker_name(), lcores, *engine);
  for (const auto& j : cfg.jobs) (void)workers->layout(j, lcores);
}

StartedEngine::~StartedEngine() {
  engine->stop();
  workers.reset();
  engine.reset();
}

float gradient(uint16_t rank, uint32_t round, uint32_t chunk, uint32_t elem) {
  return static_cast<float>((rank * 7u + round * 3u + chunk * 5u + elem) % 17u) - 8.0f;
}

std::vector<std::byte> encode(const std::vector<float>& v, Dtype d) {
  std::vector<std::byte> out(v.size() * dtype_bytes(d));
  for (size_t i = 0; i < v.size(); ++i) {
    if (d == Dtype::fp32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      // The test values are small integers: exact in bf16 (top half) and fp16.
      uint16_t h = 0;
      if (d == Dtype::bf16) {
        h = static_cast<uint16_t>(bits >> 16);
      } else {
        const float f = v[i];
        const uint16_t sign = f < 0 ? 0x8000 : 0;
        const float a = f < 0 ? -f : f;
        if (a == 0) {
          h = sign;
        } else {
          int e = 0;
          const float mant = std::frexp(a, &e);  // a = mant * 2^e, mant in [0.5, 1)
          h = static_cast<uint16_t>(sign | ((e - 1 + 15) << 10) | (static_cast<uint16_t>((mant * 2 - 1) * 1024)));
        }
      }
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<std::byte>& b, Dtype d) {
  std::vector<float> out(b.size() / dtype_bytes(d));
  for (size_t i = 0; i < out.size(); ++i) {
    if (d == Dtype::fp32) {
      std::memcpy(&out[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      if (d == Dtype::bf16) {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      } else {
        const int e = (h >> 10) & 0x1f;
        const float mant = static_cast<float>(h & 0x3ff) / 1024.0f;
        const float v = e == 0 ? std::ldexp(mant, -14) : std::ldexp(1 + mant, e - 15);
        out[i] = (h & 0x8000) ? -v : v;
      }
    }
  }
  return out;
}

engine::JobCounters job_counters(const engine::Engine& e, size_t j) { return e.totals().jobs[j]; }

uint64_t drops(const engine::Engine& e, engine::Drop d) { return e.totals().lcores.drops[static_cast<size_t>(d)]; }

uint64_t malformed(const engine::Engine& e, proto::ParseError p) {
  return e.totals().lcores.malformed[static_cast<size_t>(p)];
}

}  // namespace phub::test

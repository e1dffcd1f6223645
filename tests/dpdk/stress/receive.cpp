// The server's answers during an epoch (see driver.hpp): every frame is parsed and routed (addresses,
// queue, tag), results are placed by their header when they arrive and compared with the model when
// the rank reads them (at once, or later for a delayed one: the payload is read from the server's
// result buffer only then), errors are matched with what a rank may be owed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

#include "driver.hpp"
#include "phub/agg/kernels.hpp"
#include "wire.hpp"

namespace phub::stress {
namespace {

constexpr size_t kMaxHeld = 3;  // results read late at once (each can keep one old result buffer busy)

std::string describe_header(const proto::Header& h) {
  std::ostringstream o;
  o << proto::opcode_name(h.opcode) << " job " << h.job_id << " rank " << h.rank << " round " << h.round << " chunk "
    << h.chunk_id << " offset " << h.elem_offset << " count " << h.elem_count << " dtype "
    << static_cast<int>(h.dtype) << " flags " << h.flags << " status " << proto::status_name(h.status) << " aux "
    << h.aux << " epoch " << h.epoch << " payload_bytes " << h.payload_bytes;
  return o.str();
}

float element(std::span<const std::byte> bytes, Dtype d, size_t i) {
  float v = 0;
  agg::kernels_for(agg::Isa::scalar).init(&v, bytes.data() + i * dtype_bytes(d), d, 1);
  return v;
}

std::string element_text(std::span<const std::byte> bytes, Dtype d, size_t i) {
  std::ostringstream o;
  uint32_t bits = 0;
  std::memcpy(&bits, bytes.data() + i * dtype_bytes(d), dtype_bytes(d));
  o.precision(9);
  o << element(bytes, d, i) << " (bits 0x" << std::hex << bits << ")";
  return o.str();
}

}  // namespace

Driver::Driver(uint64_t seed, uint64_t epoch, const EpochShape& shape, std::vector<std::unique_ptr<JobRun>>& jobs,
               const engine::Engine& engine, test::Workers& wire)
    : lcores_(shape.lcores),
      round_stall_ms_(shape.round_stall_ms),
      rng_(hash_of({seed, epoch, 0x5c4ed})),
      jobs_(jobs),
      engine_(engine),
      wire_(wire),
      server_mac_(wire.server_mac()) {}

Driver::~Driver() {
  for (const Held& h : held_) rte_pktmbuf_free(h.m);
}

void Driver::fail(const std::string& what) const {
  throw Failure(what + "\n  the schedule's last events (oldest first):\n" + log_.format());
}

size_t Driver::poll() {
  rte_mbuf* pkts[32];
  size_t total = 0;
  for (uint16_t q = 0; q < wire_.queues(); ++q) {
    const uint16_t n = wire_.receive_raw(q, pkts, 32);
    frames_read_ += n;
    for (uint16_t i = 0; i < n; ++i) on_frame(pkts[i], q);
    total += n;
  }
  return total;
}

void Driver::on_frame(rte_mbuf* m, uint16_t queue) {
  read_frame(m, frame_);
  const auto f = proto::parse_phub_frame(frame_);
  if (!f) fail("the server sent a frame that is not a valid phub frame: " + std::string(proto::parse_error_name(f.error())));
  JobRun* job = nullptr;
  for (auto& j : jobs_) job = j->shape.job.id == f->hdr.job_id ? j.get() : job;
  if (job == nullptr) fail("the server sent a frame of an unknown job: " + describe_header(f->hdr));
  JobRun& j = *job;
  check_route(j, *f, queue);
  if (f->hdr.opcode == proto::Opcode::error) {
    on_error(j, *f);
    rte_pktmbuf_free(m);
    return;
  }
  if (f->hdr.opcode != proto::Opcode::result) fail("the server sent a " + describe_header(f->hdr));
  ++j.tally.results;
  const Arrival a = check_result_header(j, *f, queue);
  if (held_.size() < kMaxHeld && rng_.chance(j.shape.knobs.hold_result)) {
    const bool chunk_held = std::any_of(held_.begin(), held_.end(), [&](const Held& h) {
      return h.arrival.job == a.job && h.arrival.chunk == a.chunk;
    });
    if (!chunk_held) {
      ++j.tally.results_held;
      log_.add({tick_, EventKind::result_held, static_cast<uint8_t>(a.job), a.rank, a.queue, a.chunk, a.seg, a.round});
      held_.push_back({tick_ + 8 + rng_.below(300), m, a});
      return;
    }
  }
  deliver(a, f->payload, EventKind::result);
  rte_pktmbuf_free(m);
}

// Every frame goes to the addressed rank's MAC, IPv4 address and UDP port, from the server's and the
// owning lcore's UDP port, on that lcore's queue, signed with the job's key (or tag 0 without a secret).
void Driver::check_route(const JobRun& j, const proto::PhubFrame& f, uint16_t queue) const {
  const proto::Header& h = f.hdr;
  if (h.rank >= j.shape.job.workers || h.chunk_id >= j.layout.chunk_count()) {
    fail("the server sent a frame for a rank or chunk outside the job: " + describe_header(h));
  }
  const RankAddress to = rank_address(j.index, h.rank);
  const uint16_t owner = j.layout.chunk(h.chunk_id).owner;
  std::string wrong;
  if (!mac_equal(f.l2.dst, to.mac)) wrong += " destination MAC;";
  if (!mac_equal(f.l2.src, server_mac_)) wrong += " source MAC;";
  if (f.l2.vlan_tci != 0) wrong += " VLAN tag;";
  if (f.ip.dst != to.ip) wrong += " destination IPv4 " + std::to_string(f.ip.dst) + ";";
  if (f.ip.src != test::kServerIp) wrong += " source IPv4;";
  if (f.udp.dst_port != to.udp_port) wrong += " destination UDP port " + std::to_string(f.udp.dst_port) + ";";
  if (f.udp.src_port != j.shape.job.port_base + owner) wrong += " source UDP port " + std::to_string(f.udp.src_port) + ";";
  if (queue != owner) wrong += " queue " + std::to_string(queue) + " (owner " + std::to_string(owner) + ");";
  const auto wire_header = std::span(frame_).subspan(f.udp.payload_offset).first<proto::kHeaderBytes>();
  if (j.signing_key() != nullptr ? !proto::verify_header(j.key, wire_header) : h.auth_tag != 0) wrong += " auth tag;";
  if (!wrong.empty()) fail("wrong" + wrong + " in " + describe_header(h));
}

Driver::Arrival Driver::check_result_header(const JobRun& j, const proto::PhubFrame& f, uint16_t queue) const {
  const proto::Header& h = f.hdr;
  const config::Job& job = j.shape.job;
  const auto& ci = j.layout.chunk(h.chunk_id);
  const uint32_t se = j.layout.params().segment_elems;
  const uint32_t seg = h.elem_offset / se;
  const uint16_t mean = job.mode == config::JobMode::allreduce && job.reduce == config::Reduce::mean ? proto::flag::mean : 0;
  std::string wrong;
  if (h.elem_offset % se != 0 || seg >= ci.segments) wrong += " element offset;";
  if (wrong.empty() && h.elem_count != j.layout.segment_count_elems(ci, seg)) wrong += " element count;";
  if (h.payload_bytes != h.elem_count * dtype_bytes(job.dtype)) wrong += " payload bytes;";
  if (h.dtype != job.dtype) wrong += " dtype;";
  // Every result carries its payload's CRC32C (checked by parse_phub_frame); the mean flag as the job says.
  if (h.flags != (mean | proto::flag::crc)) wrong += " flags (the mean and crc flags);";
  if (h.status != proto::Status::ok || h.aux != 0) wrong += " status or aux;";
  if (h.epoch != 0) wrong += " epoch (the workers never restarted the job: 0);";
  const ChunkState& ch = j.progress.chunks[h.chunk_id];
  const auto round = round_of_label(h.round, job.round_modulus, ch.max_round() - 1, ch.min_round() + 1);
  if (!round) {
    wrong += " round: no round in [" + std::to_string(ch.max_round() - 1) + ", " + std::to_string(ch.min_round() + 1) +
             "] (the rounds a result may carry now) has that label;";
  }
  if (!wrong.empty()) fail("wrong" + wrong + " in " + describe_header(h));
  return {j.index, h.chunk_id, seg, h.elem_offset, h.elem_count, h.rank, queue, *round};
}

void Driver::release_held(bool all) {
  for (size_t i = 0; i < held_.size();) {
    if (!all && held_[i].due_tick > tick_) {
      ++i;
      continue;
    }
    const Held h = held_[i];
    held_[i] = held_.back();
    held_.pop_back();
    read_frame(h.m, frame_);
    rte_pktmbuf_free(h.m);
    const auto f = proto::parse_phub_frame(frame_);
    if (!f) fail("a delayed result no longer parses: " + std::string(proto::parse_error_name(f.error())));
    deliver(h.arrival, f->payload, EventKind::result_late);
  }
}

// The rank reads a result: the initial weights (label -1) as the answer to a pull or init it sent (ps),
// anything else as the result of the round its label names. Either way every element must be the model's.
void Driver::deliver(const Arrival& a, std::span<const std::byte> payload, EventKind how) {
  JobRun& j = *jobs_[a.job];
  ChunkState& ch = j.progress.chunks[a.chunk];
  ++tally_.results_checked;
  tally_.elements_checked += a.count;
  log_.add({tick_, how, static_cast<uint8_t>(a.job), a.rank, a.queue, a.chunk, a.seg, a.round});
  uint16_t& owed = ch.pull_answers[ch.at(a.rank, a.seg)];
  if (a.round == -1 && j.ps() && owed != 0 && !differs(j, a, -1, payload)) {
    --owed;
    if (a.rank == 0 && (ch.init[a.seg] & kGot) == 0) {
      ch.init[a.seg] |= kGot;
      // Every early push still unanswered was counted (its refusal would have come before this answer).
      if (++ch.init_acks == ch.segments) std::fill(ch.early.begin(), ch.early.end(), 0);
    }
    return;
  }
  if (a.round < 0 || a.round >= j.shape.rounds) {
    fail("job [" + std::to_string(a.job) + "] rank " + std::to_string(a.rank) + " chunk " + std::to_string(a.chunk) +
         " seg " + std::to_string(a.seg) + ": a result labelled round " + std::to_string(a.round) +
         (a.round == -1 && owed != 0 ? " that does not hold the initial weights" : " (no such round)"));
  }
  auto diff = differs(j, a, a.round, payload);
  if (!diff && !j.model.bit_exact()) diff = differs_from_first_copy(j, a, payload);
  if (diff) {
    fail("job [" + std::to_string(a.job) + "] rank " + std::to_string(a.rank) + " chunk " + std::to_string(a.chunk) +
         " seg " + std::to_string(a.seg) + " round " + std::to_string(a.round) + ": wrong result" +
         (how == EventKind::result_late ? " (read late)" : "") + ": " + *diff + "; the chunk's ranks are in rounds " +
         std::to_string(ch.min_round()) + ".." + std::to_string(ch.max_round()) + ", the job's advances_deferred is " +
         std::to_string(engine_.totals().jobs[a.job].advances_deferred));
  }
  count_result(j, a);
}

// A result of the rank's current round that it did not hold yet: it holds it now, or loses it.
void Driver::count_result(JobRun& j, const Arrival& a) {
  ChunkState& ch = j.progress.chunks[a.chunk];
  RankChunk& rc = ch.ranks[a.rank];
  if (a.round != rc.round || (rc.segs[a.seg] & kGot) != 0) return;
  if ((rc.segs[a.seg] & kSent) == 0) {
    fail("job [" + std::to_string(a.job) + "] rank " + std::to_string(a.rank) + " chunk " + std::to_string(a.chunk) +
         " seg " + std::to_string(a.seg) + ": the result of round " + std::to_string(a.round) +
         " arrived, but this rank never put a push of that segment of that round on the wire");
  }
  if (rng_.chance(j.shape.knobs.lose_result)) {
    ++j.tally.results_lost;
    log_.add({tick_, EventKind::result_lost, static_cast<uint8_t>(a.job), a.rank, a.queue, a.chunk, a.seg, a.round});
    return;
  }
  rc.segs[a.seg] |= kGot;
  rc.recover_at = recovery_time();
  if (++rc.got < ch.segments) return;
  // Every segment's result of the round: the rank moves on to the next round of this chunk.
  ++rc.round;
  rc.got = 0;
  std::fill(rc.segs.begin(), rc.segs.end(), 0);
  if (rc.round < j.shape.rounds) {
    add_round_todos(a.job, a.chunk, a.rank);
  } else if (++ch.ranks_done == j.shape.job.workers) {
    ++j.progress.chunks_done;
  }
}

std::optional<std::string> Driver::differs(JobRun& j, const Arrival& a, int64_t round,
                                           std::span<const std::byte> payload) const {
  const Dtype d = j.shape.job.dtype;
  const size_t b = dtype_bytes(d);
  const auto expect = j.model.result(a.chunk, round).subspan(a.first * b, a.count * b);
  if (j.model.bit_exact()) {
    if (std::memcmp(expect.data(), payload.data(), expect.size()) == 0) return std::nullopt;
    for (uint32_t i = 0; i < a.count; ++i) {
      if (std::memcmp(expect.data() + i * b, payload.data() + i * b, b) == 0) continue;
      return "element " + std::to_string(a.first + i) + " of the chunk is " + element_text(payload, d, i) +
             ", the model's is " + element_text(expect, d, i);
    }
  }
  for (uint32_t i = 0; i < a.count; ++i) {
    const float v = element(payload, d, i);
    const float lo = j.model.lowest(a.chunk, round, a.first + i);
    const float hi = j.model.highest(a.chunk, round, a.first + i);
    if (v >= lo && v <= hi) continue;
    std::ostringstream o;
    o.precision(9);
    o << "element " << a.first + i << " of the chunk is " << element_text(payload, d, i) << ", outside the model's ["
      << lo << ", " << hi << "] (any order of summation; model.hpp)";
    return o.str();
  }
  return std::nullopt;
}

// Where the server sums random floats in arrival order the model gives a range; every copy of one result
// must still be the same bytes as the first.
std::optional<std::string> Driver::differs_from_first_copy(JobRun& j, const Arrival& a,
                                                           std::span<const std::byte> payload) const {
  auto [it, first] = j.first_seen.try_emplace({a.chunk, a.round, a.seg}, payload.begin(), payload.end());
  if (first || std::equal(payload.begin(), payload.end(), it->second.begin(), it->second.end())) return std::nullopt;
  const Dtype d = j.shape.job.dtype;
  uint32_t i = 0;
  while (i + 1 < a.count && element(payload, d, i) == element(it->second, d, i)) ++i;
  return "a copy differs from the first copy received: element " + std::to_string(a.first + i) + " is " +
         element_text(payload, d, i) + ", was " + element_text(it->second, d, i);
}

// An error must answer something the rank may be owed one for (and say what the server could say then).
void Driver::on_error(JobRun& j, const proto::PhubFrame& f) {
  const proto::Header& h = f.hdr;
  ChunkState& ch = j.progress.chunks[h.chunk_id];
  RankChunk& rc = ch.ranks[h.rank];
  const uint32_t modulus = j.shape.job.round_modulus;
  ++j.tally.errors;
  ++j.tally.errors_by_status[static_cast<size_t>(h.status)];
  log_.add({tick_, EventKind::error, static_cast<uint8_t>(j.index), h.rank, 0, h.chunk_id,
            h.elem_offset / j.layout.params().segment_elems, static_cast<int64_t>(h.status)});
  if (h.payload_bytes != 0 || h.dtype != j.shape.job.dtype || h.epoch != 0) fail("wrong error header: " + describe_header(h));
  const auto server_round = [&](uint32_t label) {
    return round_of_label(label, modulus, ch.max_round(), ch.min_round() + 1);
  };
  switch (h.status) {
    case proto::Status::not_initialized: {
      const uint32_t seg = h.elem_offset / j.layout.params().segment_elems;
      uint16_t& early = ch.early[ch.at(h.rank, seg)];
      if (!j.ps() || seg >= ch.segments || early == 0) fail("not_initialized for no early push: " + describe_header(h));
      --early;
      rc.segs[seg] &= static_cast<uint8_t>(~(kPushed | kSent));
      todo_.push_back({j.index, h.chunk_id, seg, h.rank, false});
      return;
    }
    case proto::Status::round_behind:
    case proto::Status::round_ahead: {
      // The answer to a packet of this rank that reached the server two or more rounds after its round
      // (held up on the way); ahead where the round modulus makes it look so.
      const int64_t d = label_delta(h.round, h.aux, modulus);
      const bool fits = h.status == proto::Status::round_behind ? d <= -2 : d >= 1;
      const auto now = server_round(h.aux);
      bool sent = false;
      for (int64_t r = 0; now && r + 2 <= *now; ++r) sent = sent || ((rc.rounds_sent >> r) & 1U && j.label(r) == h.round);
      if (!now || !fits || !sent) {
        fail("a " + std::string(proto::status_name(h.status)) + " error for no packet this rank sent two or more " +
             "rounds before the server's round (server round window [" + std::to_string(ch.max_round()) + ", " +
             std::to_string(ch.min_round() + 1) + "]): " + describe_header(h));
      }
      return;
    }
    case proto::Status::round_stalled: {
      // To a rank that pushed to the server's current round, which is then that rank's round.
      const auto round = server_round(h.round);
      if (!round || *round != rc.round || h.aux >= j.shape.job.workers || h.elem_offset != 0) {
        fail("a round_stalled error for a round this rank is not in: " + describe_header(h) + " (rank's round " +
             std::to_string(rc.round) + ")");
      }
      return;
    }
    default:
      fail("an error no legal schedule provokes: " + describe_header(h));
  }
}

void Driver::drain() {
  release_deferred(true);
  release_held(true);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  auto quiet_since = Clock::now();
  for (;;) {
    now_ = Clock::now();
    if (poll() != 0) quiet_since = now_;
    release_held(true);
    if (engine_.transmit_mbufs_in_use() == 0 && now_ - quiet_since > std::chrono::milliseconds(20)) return;
    if (now_ > deadline) {
      fail("the engine's transmit mbufs did not return to their pools: " +
           std::to_string(engine_.transmit_mbufs_in_use()) + " in use after every result was received and freed");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace phub::stress

// The emulated workers' side of an epoch (see driver.hpp): first pushes in a random order across jobs,
// chunks, segments and ranks; around them the hostile but legal extras each job's knobs ask for; and
// recovery of what a rank lacks (lost pushes, lost or delayed results).
#include <algorithm>
#include <thread>

#include "driver.hpp"
#include "wire.hpp"

namespace phub::stress {
namespace {

// Whole-chunk rerequests and pulls only where they ask for this many segments at most (one asks the
// server for a burst of answers).
constexpr uint32_t kWholeChunkSegments = 32;

// What may wait at the server before the workers send more (frames not yet taken from the RX queues or
// from a hand-off ring; answers not yet read): well within the rings, TX buffers and mbuf pools.
constexpr uint64_t kMaxUntaken = 256;
constexpr uint64_t kMaxUnread = 768;

}  // namespace

// Like a worker's window: nothing more is sent while the server has much to take in or much unread.
bool Driver::may_send() {
  if (window_open_ && frames_sent_ - window_checked_at_ < 16) return true;
  const engine::Totals t = engine_.totals();
  uint64_t answers = 0;
  for (const auto& c : t.jobs) answers += c.results_sent + c.errors_sent;
  const auto above = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  window_open_ = above(frames_sent_, t.lcores.rx_packets) < kMaxUntaken &&
                 above(t.lcores.redirected_out, t.lcores.redirected_in) < kMaxUntaken &&
                 above(answers, frames_read_) < kMaxUnread;
  window_checked_at_ = frames_sent_;
  return window_open_;
}

void Driver::add_round_todos(uint32_t job, uint32_t chunk, uint16_t rank) {
  const ChunkState& ch = jobs_[job]->progress.chunks[chunk];
  for (uint32_t s = 0; s < ch.segments; ++s) todo_.push_back({job, chunk, s, rank, false});
}

bool Driver::all_done() const noexcept {
  return std::all_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return j->progress.done(); });
}

bool Driver::stalled(const JobRun& j, uint16_t rank) const noexcept { return now_ < j.progress.stalled_until[rank]; }

void Driver::stall(JobRun& j, uint16_t rank) {
  // Mostly short. Once per job and epoch longer than the server's round_stall_ms, so that it reports the
  // rounds waiting for this rank to every rank that pushed to them: only where that is a burst of at most
  // kMaxStallReports errors (more would overflow the server's transmit buffer and the ring).
  constexpr uint64_t kMaxStallReports = 512;
  const bool may_report = uint64_t{j.layout.chunk_count()} * j.shape.job.workers <= kMaxStallReports;
  const bool long_stall = may_report && !j.progress.long_stall_taken && rng_.chance(0.3);
  j.progress.long_stall_taken = j.progress.long_stall_taken || long_stall;
  const int64_t ms = long_stall ? round_stall_ms_ + rng_.between(5, 40) : rng_.between(1, 10);
  j.progress.stalled_until[rank] = now_ + std::chrono::milliseconds(ms);
  ++j.tally.stalls;
  log_.add({tick_, EventKind::stall, static_cast<uint8_t>(j.index), rank, 0, 0, 0, ms});
}

// Picks a few todos at random; does the first one whose rank may act now.
bool Driver::try_todo() {
  for (int attempt = 0; attempt < 8 && !todo_.empty(); ++attempt) {
    const size_t i = rng_.below(todo_.size());
    const Todo t = todo_[i];
    JobRun& j = *jobs_[t.job];
    const Outcome o = t.init ? first_init(j, t) : first_push(j, t);
    if (o == Outcome::waiting) continue;
    if (o == Outcome::done) {
      todo_[i] = todo_.back();
      todo_.pop_back();
    }
    return true;
  }
  return false;
}

Driver::Outcome Driver::first_push(JobRun& j, const Todo& t) {
  ChunkState& ch = j.progress.chunks[t.chunk];
  RankChunk& rc = ch.ranks[t.rank];
  const Knobs& k = j.shape.knobs;
  if (stalled(j, t.rank)) return Outcome::waiting;
  bool early = false;
  if (!ch.initialized(j.ps())) {
    // Before rank 0 starts the chunk's inits, another rank may push (and be refused, or counted if the
    // push reaches the lcore after the inits).
    if (t.rank == 0 || ch.init_started || !rng_.chance(k.early_push)) return Outcome::waiting;
    early = true;
  }
  if (rng_.chance(k.stall)) {
    stall(j, t.rank);
    return Outcome::acted;
  }
  rc.segs[t.seg] |= kPushed;
  rc.recover_at = recovery_time();
  if (early) {
    ++ch.early[ch.at(t.rank, t.seg)];
    send_push(j, t.rank, t.chunk, t.seg, rc.round, 0, EventKind::push_early);
    return Outcome::done;
  }
  if (rng_.chance(k.lose_push)) {
    ++j.tally.pushes_lost;
    log_.add({tick_, EventKind::push_lost, static_cast<uint8_t>(j.index), t.rank, 0, t.chunk, t.seg, rc.round});
    return Outcome::done;
  }
  send_push(j, t.rank, t.chunk, t.seg, rc.round, 0, EventKind::push);
  if (rng_.chance(k.duplicate)) {
    const uint16_t flags = rng_.chance(0.5) ? proto::flag::retransmit : 0;
    if (rng_.chance(0.5)) {
      send_push(j, t.rank, t.chunk, t.seg, rc.round, flags, EventKind::push_again);
    } else {
      deferred_.push_back({tick_ + 1 + rng_.below(400), t.job, t.chunk, t.seg, t.rank, flags, rc.round});
    }
  }
  extras(j, t.chunk, t.rank);
  return Outcome::done;
}

Driver::Outcome Driver::first_init(JobRun& j, const Todo& t) {
  ChunkState& ch = j.progress.chunks[t.chunk];
  if (stalled(j, 0)) return Outcome::waiting;
  ch.init_started = true;
  ch.init[t.seg] |= kPushed;
  ch.ranks[0].recover_at = recovery_time();
  if (rng_.chance(j.shape.knobs.lose_push)) {
    ++j.tally.pushes_lost;
    log_.add({tick_, EventKind::init_lost, static_cast<uint8_t>(j.index), 0, 0, t.chunk, t.seg, -1});
    return Outcome::done;
  }
  send_init(j, t.chunk, t.seg, 0);
  if (rng_.chance(j.shape.knobs.duplicate)) send_init(j, t.chunk, t.seg, proto::flag::retransmit);
  return Outcome::done;
}

// What else a rank that just pushed does now and then: push a segment of the previous round again, ask
// for a result again, pull weights, or (rank 0) send an init again.
void Driver::extras(JobRun& j, uint32_t chunk, uint16_t rank) {
  ChunkState& ch = j.progress.chunks[chunk];
  const RankChunk& rc = ch.ranks[rank];
  const Knobs& k = j.shape.knobs;
  if (rc.round >= 1 && rng_.chance(k.late_push)) {
    const uint16_t flags = rng_.chance(0.7) ? proto::flag::retransmit : 0;
    send_push(j, rank, chunk, static_cast<uint32_t>(rng_.below(ch.segments)), rc.round - 1, flags,
              EventKind::push_late);
  }
  if (rng_.chance(k.rerequest)) {
    const int64_t round = rc.round >= 1 && rng_.chance(0.4) ? rc.round - 1 : rc.round;
    std::optional<uint32_t> seg;
    if (ch.segments > kWholeChunkSegments || rng_.chance(0.6)) seg = static_cast<uint32_t>(rng_.below(ch.segments));
    send_request(j, proto::Opcode::rerequest, rank, chunk, seg, round);
  }
  if (!j.ps()) return;
  if (rng_.chance(k.pull)) try_pull(j, chunk, static_cast<uint16_t>(rng_.below(j.shape.job.workers)));
  if (rng_.chance(k.init_again)) try_init_again(j, chunk, static_cast<uint32_t>(rng_.below(ch.segments)));
}

void Driver::try_pull(JobRun& j, uint32_t chunk, uint16_t rank) {
  ChunkState& ch = j.progress.chunks[chunk];
  if (!ch.initialized(true)) return;
  std::optional<uint32_t> seg;
  if (ch.segments > kWholeChunkSegments || rng_.chance(0.6)) seg = static_cast<uint32_t>(rng_.below(ch.segments));
  const uint32_t first = seg.value_or(0);
  const uint32_t last = seg ? *seg + 1 : ch.segments;
  for (uint32_t s = first; s < last; ++s) ++ch.pull_answers[ch.at(rank, s)];
  send_request(j, proto::Opcode::pull, rank, chunk, seg, ch.ranks[rank].round);
}

void Driver::try_init_again(JobRun& j, uint32_t chunk, uint32_t seg) {
  const ChunkState& ch = j.progress.chunks[chunk];
  if ((ch.init[seg] & kSent) == 0) return;
  send_init(j, chunk, seg, proto::flag::retransmit);
}

// Scans a few (job, chunk, rank) places, round robin, for one that should recover something.
bool Driver::recover_some() {
  size_t places = 0;
  for (const auto& j : jobs_) places += j->progress.chunks.size() * j->shape.job.workers;
  for (int n = 0; n < 64; ++n) {
    size_t at = recover_cursor_++ % places;
    for (auto& j : jobs_) {
      const size_t workers = j->shape.job.workers;
      const size_t here = j->progress.chunks.size() * workers;
      if (at < here) {
        if (recover(*j, static_cast<uint32_t>(at / workers), static_cast<uint16_t>(at % workers))) return true;
        break;
      }
      at -= here;
    }
  }
  return false;
}

// A rank that lacks a result it is due (every rank pushed that segment) or whose own push was lost asks
// again, pushes again, or resends what was lost, with the retransmit flag.
bool Driver::recover(JobRun& j, uint32_t chunk, uint16_t rank) {
  ChunkState& ch = j.progress.chunks[chunk];
  RankChunk& rc = ch.ranks[rank];
  if (rc.round >= j.shape.rounds || now_ < rc.recover_at || stalled(j, rank)) return false;
  if (!ch.initialized(j.ps())) return rank == 0 && resend_inits(j, chunk);
  std::vector<uint32_t> lacking, lost;
  for (uint32_t s = 0; s < ch.segments; ++s) {
    const uint8_t b = rc.segs[s];
    if ((b & kPushed) == 0 || (b & kGot) != 0) continue;
    if ((b & kSent) == 0) {
      lost.push_back(s);
    } else if (ch.all_sent(rc.round, s)) {
      lacking.push_back(s);
    }
  }
  if (lost.empty() && lacking.empty()) return false;
  rc.recover_at = recovery_time();
  if (!lost.empty()) {
    for (uint32_t s : lost) send_push(j, rank, chunk, s, rc.round, proto::flag::retransmit, EventKind::push_again);
    return true;
  }
  const uint32_t s = lacking[rng_.below(lacking.size())];
  const uint64_t choice = rng_.below(10);
  if (choice < 3 && ch.segments <= kWholeChunkSegments) {
    send_request(j, proto::Opcode::rerequest, rank, chunk, std::nullopt, rc.round);
  } else if (choice < 7) {
    send_request(j, proto::Opcode::rerequest, rank, chunk, s, rc.round);
  } else {
    send_push(j, rank, chunk, s, rc.round, proto::flag::retransmit, EventKind::push_again);
  }
  return true;
}

// Rank 0 resends the inits it has no acknowledgement of and no answer is owed for (lost on the way).
bool Driver::resend_inits(JobRun& j, uint32_t chunk) {
  ChunkState& ch = j.progress.chunks[chunk];
  bool any = false;
  for (uint32_t s = 0; s < ch.segments; ++s) {
    if ((ch.init[s] & kPushed) == 0 || (ch.init[s] & kGot) != 0 || ch.pull_answers[ch.at(0, s)] != 0) continue;
    send_init(j, chunk, s, proto::flag::retransmit);
    any = true;
  }
  if (any) ch.ranks[0].recover_at = recovery_time();
  return any;
}

void Driver::release_deferred(bool all) {
  for (size_t i = 0; i < deferred_.size();) {
    const Deferred d = deferred_[i];
    if (!all && d.due_tick > tick_) {
      ++i;
      continue;
    }
    deferred_[i] = deferred_.back();
    deferred_.pop_back();
    JobRun& j = *jobs_[d.job];
    ChunkState& ch = j.progress.chunks[d.chunk];
    const int64_t now_round = ch.ranks[d.rank].round;
    // A copy older than the rank's previous round is lost on the way: with a small round modulus it could
    // alias a current round (no network keeps a datagram that long).
    if (d.round < now_round - 1) continue;
    send_push(j, d.rank, d.chunk, d.seg, d.round, d.flags, EventKind::push_deferred);
  }
}

void Driver::send_push(JobRun& j, uint16_t rank, uint32_t chunk, uint32_t seg, int64_t round, uint16_t flags,
                       EventKind why) {
  const auto& ci = j.layout.chunk(chunk);
  const uint32_t first = j.layout.segment_offset(seg);
  const uint32_t n = j.layout.segment_count_elems(ci, seg);
  std::vector<std::byte> payload(n * dtype_bytes(j.shape.job.dtype));
  j.values.gradient(chunk, round, rank, first, n, payload.data());
  proto::Header h;
  h.opcode = proto::Opcode::push;
  h.flags = flags;
  h.dtype = j.shape.job.dtype;
  h.round = j.label(round);
  h.elem_offset = first;
  h.elem_count = static_cast<uint16_t>(n);
  ++j.tally.push_packets;
  RankChunk& rc = j.progress.chunks[chunk].ranks[rank];
  if (round == rc.round) rc.segs[seg] |= kSent;
  rc.rounds_sent |= uint64_t{1} << round;
  send(j, rank, chunk, h, payload, {tick_, why, static_cast<uint8_t>(j.index), rank, 0, chunk, seg, round});
}

void Driver::send_init(JobRun& j, uint32_t chunk, uint32_t seg, uint16_t flags) {
  ChunkState& ch = j.progress.chunks[chunk];
  const auto& ci = j.layout.chunk(chunk);
  const uint32_t first = j.layout.segment_offset(seg);
  const uint32_t n = j.layout.segment_count_elems(ci, seg);
  // fp32 is the recommended init dtype; a bf16/fp16 segment of more than 352 elements fits only as itself.
  const Dtype d = n <= proto::segment_elems(kMtu, Dtype::fp32) && rng_.chance(0.5) ? Dtype::fp32 : j.shape.job.dtype;
  std::vector<std::byte> payload(n * dtype_bytes(d));
  j.values.initial_weights(chunk, first, n, d, payload.data());
  proto::Header h;
  h.opcode = proto::Opcode::init;
  h.flags = flags;
  h.dtype = d;
  h.round = j.label(ch.ranks[0].round);
  h.elem_offset = first;
  h.elem_count = static_cast<uint16_t>(n);
  ch.init[seg] |= kSent;
  ++ch.pull_answers[ch.at(0, seg)];
  ++j.tally.init_packets;
  send(j, 0, chunk, h, payload, {tick_, EventKind::init, static_cast<uint8_t>(j.index), 0, 0, chunk, seg, -1});
}

// A rerequest or pull of one segment, or (no segment) of the whole chunk.
void Driver::send_request(JobRun& j, proto::Opcode op, uint16_t rank, uint32_t chunk, std::optional<uint32_t> seg,
                          int64_t round) {
  proto::Header h;
  h.opcode = op;
  h.dtype = j.shape.job.dtype;
  h.round = j.label(round);
  if (seg) {
    h.elem_offset = j.layout.segment_offset(*seg);
    h.elem_count = static_cast<uint16_t>(j.layout.segment_count_elems(j.layout.chunk(chunk), *seg));
  }
  if (rng_.chance(0.5)) h.flags = proto::flag::retransmit;
  (op == proto::Opcode::pull ? j.tally.pulls : j.tally.rerequests) += 1;
  j.progress.chunks[chunk].ranks[rank].rounds_sent |= uint64_t{1} << round;
  const EventKind why = op == proto::Opcode::pull ? EventKind::pull : EventKind::rerequest;
  send(j, rank, chunk, h, {}, {tick_, why, static_cast<uint8_t>(j.index), rank, 0, chunk, seg.value_or(0xffffffffU), round});
}

// Onto the owning lcore's queue, or now and then (two lcores) the other one: the lcore that gets it must
// hand it to the owner through its ring.
void Driver::send(JobRun& j, uint16_t rank, uint32_t chunk, proto::Header h, std::span<const std::byte> payload,
                  const Event& e) {
  h.job_id = j.shape.job.id;
  h.rank = rank;
  h.chunk_id = chunk;
  if (proto::opcode_carries_cookie(h.opcode)) h.aux = j.cookies[rank];
  const uint16_t owner = j.layout.chunk(chunk).owner;
  const auto frame = worker_frame(rank_address(j.index, rank), server_mac_,
                                  static_cast<uint16_t>(j.shape.job.port_base + owner), h, payload, j.signing_key());
  uint16_t queue = owner;
  if (lcores_ > 1 && rng_.chance(j.shape.knobs.misdirect)) {
    queue = static_cast<uint16_t>((owner + 1) % lcores_);
    ++tally_.misdirected;
  }
  if ((h.flags & proto::flag::retransmit) != 0) ++j.tally.retransmit_flags;
  Event logged = e;
  logged.queue = queue;
  log_.add(logged);
  ++frames_sent_;
  wire_.send_frame(frame, queue);
}

void Driver::join_all() {
  size_t waiting = 0;
  for (auto& jp : jobs_) {
    JobRun& j = *jp;
    j.cookies.assign(j.shape.job.workers, 0);
    for (uint16_t r = 0; r < j.shape.job.workers; ++r) {
      proto::Header h;
      h.opcode = proto::Opcode::join;
      h.job_id = j.shape.job.id;
      h.rank = r;
      h.aux = 1000u + r;  // the incarnation
      wire_.send_frame(worker_frame(rank_address(j.index, r), server_mac_, j.shape.job.port_base, h, {}, j.signing_key()), 0);
      ++waiting;
    }
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  rte_mbuf* pkts[32];
  while (waiting != 0) {
    if (Clock::now() > deadline) fail("join: " + std::to_string(waiting) + " ranks got no joined answer in 10 s");
    for (uint16_t q = 0; q < wire_.queues(); ++q) {
      const uint16_t n = wire_.receive_raw(q, pkts, 32);
      for (uint16_t i = 0; i < n; ++i) {
        read_frame(pkts[i], frame_);
        rte_pktmbuf_free(pkts[i]);
        const auto f = proto::parse_phub_frame(frame_);
        if (!f || f->hdr.opcode != proto::Opcode::joined || f->hdr.crc32c == 0) fail("join: an answer that is not joined with a cookie");
        for (auto& jp : jobs_) {
          if (jp->shape.job.id != f->hdr.job_id || f->hdr.rank >= jp->cookies.size()) continue;
          if (jp->cookies[f->hdr.rank] == 0) --waiting;
          jp->cookies[f->hdr.rank] = f->hdr.crc32c;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Driver::run() {
  join_all();
  for (uint32_t jx = 0; jx < jobs_.size(); ++jx) {
    JobRun& j = *jobs_[jx];
    for (uint32_t c = 0; c < j.layout.chunk_count(); ++c) {
      for (uint16_t r = 0; r < j.shape.job.workers; ++r) add_round_todos(jx, c, r);
      if (j.ps()) {
        for (uint32_t s = 0; s < j.progress.chunks[c].segments; ++s) todo_.push_back({jx, c, s, 0, true});
      }
    }
  }
  now_ = Clock::now();
  Clock::time_point last_activity = now_;
  while (!all_done()) {
    ++tick_;
    now_ = Clock::now();
    const size_t received = poll();
    release_held(false);
    const bool open = may_send();
    if (open) release_deferred(false);
    if ((open && (try_todo() || recover_some())) || received != 0) {
      last_activity = now_;
      continue;
    }
    if (now_ - last_activity > std::chrono::seconds(10)) fail("stuck: no packet sent or received for 10 s");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    tick_ += 8;  // waiting counts towards the ranks' recovery timers
  }
}

}  // namespace phub::stress

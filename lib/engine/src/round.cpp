// The round's steps on one lcore's chunk, in the order a round takes them: a push is taken into the round
// (take_push: contribute, and what its outcome sends), a segment completes (complete_segment: its result to
// the ranks, and across racks), the round finishes (finish_round) and advances once its previous buffer is
// free (try_advance, release_previous); a chunk whose advance waits answers only its completed round
// (deferred). A checkpoint's capture copies a segment before a round changes it (capture_segment) and opens a
// chunk as its round completes (open_capture): lcore_checkpoint.cpp. What the steps send: tx.cpp, forward.cpp.
#include <rte_cycles.h>

#include "forwarder.hpp"
#include "job_handler.hpp"
#include "phub/agg/nonfinite.hpp"
#include "messages.hpp"
#include "phub/engine/hierarchy.hpp"

namespace phub::engine {

void JobHandler::take_push(const RxFrame& rx, Chunk& c, uint32_t seg, const RoundIntent& intent) noexcept {
  const JobMath& m = plan.math;
  if (deferred(rx, c)) return;
  const bool opens_round = c.first_tsc == 0;
  if (opens_round && lj.draining && round_delta(m, rx.hdr.round, c.round) == 0) {
    io.count_drop(lj, Drop::draining);
    return send_error(rx, proto::Status::draining, c.round);
  }
  if (lj.capture != nullptr) capture_segment(c, seg);  // before the next round can change it
  const PushResult result = contribute(m, c, rx.hdr.rank, rx.hdr.round, seg, rx.payload.data(), io.now_tsc, intent);
  if (opens_round && c.first_tsc != 0) bump(lj.open_rounds);
  // Counted, or a duplicate answered again: taken, whatever sending the results then meets.
  if (push_taken(result)) io.take();
  const bool summed = result == PushResult::accepted || result == PushResult::segment_complete ||
                      result == PushResult::rack_complete;
  if (summed) {
    bump(lj.counters.pushes);
    bump(lj.counters.push_payload_bytes, rx.payload.size());
  }
  switch (result) {
    case PushResult::accepted:
      break;
    case PushResult::segment_complete:
      complete_segment(c, seg);
      break;
    case PushResult::rack_complete:
      hub().send_partial(c, seg, false);
      break;
    case PushResult::duplicate:
      bump(lj.counters.duplicates);
      break;
    case PushResult::duplicate_complete:
      bump(lj.counters.duplicates);
      if (send_segment(c, c.cur, c.round, seg, rx.hdr.rank)) bump(lj.counters.results_resent);
      break;
    case PushResult::previous_round:
      bump(lj.counters.duplicates);
      if (send_segment(c, c.cur ^ 1, rx.hdr.round, seg, rx.hdr.rank)) bump(lj.counters.results_resent);
      break;
    case PushResult::ahead:
      io.count_drop(lj, Drop::round_ahead);
      send_error(rx, proto::Status::round_ahead, c.round);
      break;
    case PushResult::behind:
      io.count_drop(lj, Drop::round_behind);
      send_error(rx, proto::Status::round_behind, c.round);
      break;
    case PushResult::not_initialized:
      hub().ask_home_for_weights(c);
      io.count_drop(lj, Drop::not_initialized);
      send_error(rx, proto::Status::not_initialized, 0);
      break;
    case PushResult::bad_round:
      io.count_drop(lj, Drop::bad_request);
      send_error(rx, proto::Status::bad_request, m.round_modulus);
      break;
    case PushResult::hparams_unknown:
      io.count_drop(lj, Drop::hparams_unknown);
      send_error(rx, proto::Status::hparams_unknown, 0);
      break;
    case PushResult::hparams_mismatch:
      io.count_drop(lj, Drop::hparams_mismatch);
      send_error(rx, proto::Status::hparams_mismatch, 0);
      break;
  }
}

bool JobHandler::deferred(const RxFrame& rx, Chunk& c) noexcept {
  if (!c.advance_pending || try_advance(c)) return false;
  if (round_delta(plan.math, rx.hdr.round, c.round) == 0) return false;  // answered from the round's buffer
  // The next round waits (its worker resends); an older one is a late copy every rank is past (the round
  // completed, so every rank held the round before it): neither gets an answer.
  io.count_drop(lj, Drop::advance_pending);
  return true;
}


void JobHandler::complete_segment(Chunk& c, uint32_t seg) noexcept {
  bump(lj.counters.segments_completed);
  const JobMath& m = plan.math;
  if (!m.ps) {  // an allreduce job's non-finite results go out as they are, counted
    const size_t bytes = dtype_bytes(m.out_dtype);
    if (agg::any_nonfinite(c.out[c.cur] + static_cast<size_t>(segment_offset(m, seg)) * bytes, m.out_dtype,
                           segment_elems(m, c, seg))) {
      bump(lj.counters.nonfinite_sums);
    }
  }
  send_segment_to_all(c, seg);
  if (hierarchical(m) && c.home == m.hub.my_rack) hub().send_result_to_racks(c, seg);
  if (round_complete(c)) finish_round(c);
}


void JobHandler::finish_round(Chunk& c) noexcept {
  bump(lj.counters.rounds_completed);
  if (plan.math.ps && c.skip) bump(lj.counters.rounds_skipped);
  close_round();
  const uint64_t took_tsc = io.now_tsc > c.first_tsc ? io.now_tsc - c.first_tsc : 0;
  const auto took_ns = static_cast<uint64_t>(static_cast<double>(took_tsc) * 1e9 / static_cast<double>(io.snap->tsc_hz));
  bump(lj.counters.round_latency_sum_ns, took_ns);
  bump(lj.counters.round_latency[latency_bucket(took_ns / 1000)]);
  if (!lj.rounds_in_epoch || round_delta(plan.math, c.round, lj.newest_round) > 0) {
    __atomic_store_n(&lj.newest_round, c.round, __ATOMIC_RELAXED);
    __atomic_store_n(&lj.rounds_in_epoch, true, __ATOMIC_RELAXED);
  }
  if (lj.capture != nullptr) open_capture(c);  // its segments are copied before the next round changes them
  try_advance(c);  // the previous result is about to be overwritten by the next round
}


bool JobHandler::release_previous(Chunk& c) noexcept {
  // Free what the NICs are done with; if a transmit still points at the buffer, swap in a spare.
  if (!LcoreJob::busy(LcoreJob::buf(c, c.cur ^ 1))) return true;
  for (auto& t : io.tx) t.flush(io.counters);
  for (const auto* port : io.res.ports) port->tx_done_cleanup(io.res.index);
  return lj.renew_previous(c);
}


bool JobHandler::try_advance(Chunk& c) noexcept {
  if (!release_previous(c)) {
    // The previous result is still being sent and no spare is free: overwriting it would send the next
    // round's data under the older label. The chunk waits, complete; pushes for the next round are
    // dropped (the workers resend them) until a transmit completes or a spare returns.
    if (!c.advance_pending) bump(lj.counters.advances_deferred);
    c.advance_pending = true;
    c.first_tsc = 0;  // no round in progress: nothing to report as stalled
    return false;
  }
  c.advance_pending = false;
  advance_round(plan.math, c);
  return true;
}


}  // namespace phub::engine

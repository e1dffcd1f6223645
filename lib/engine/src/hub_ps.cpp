// Parameter-server jobs across racks (docs/hierarchy.md, "Parameter-server jobs"): a chunk's home hub holds
// its weights and optimizer state; rank 0's hub forwards rank 0's init to the home (fwd_init), and a rack
// hub without a chunk's weights asks the home for them (a fwd_init without elements). The home answers both
// with fwd_result segments of its newest weights, which a rack hub keeps as what its pulls return.
#include "lcore.hpp"
#include "forwarder.hpp"
#include "job_handler.hpp"
#include "rx_frame.hpp"

namespace phub::engine {

void Forwarder::relay_init(RxFrame& rx, Chunk& c, uint32_t seg) noexcept {
  const JobMath& m = plan.math;
  if (segment_initialized(c, seg)) {
    // The home's weights are here: answered as a flat server answers an init (its current weights).
    const auto [buffer, label] = newest_result(m, c);
    (void)job.send_segment(c, buffer, label, seg, rx.hdr.rank);
    return;
  }
  // Forwarded as it came (its dtype, its elements): the size of the packet rank 0 sent, never more. Rank 0
  // sends its init again until it is answered, and each one is forwarded again until the home's weights
  // are here: so a lost forward or a lost answer is repaired by rank 0's own retransmit.
  proto::Header h = rx.hdr;
  h.opcode = proto::Opcode::fwd_init;
  h.flags = rx.hdr.flags & proto::flag::retransmit;
  h.rank = m.hub.my_rack;
  h.round = newest_result(m, c).second;
  h.epoch = lj.epoch;
  h.crc32c = 0;
  h.aux = 0;
  transmit_forward(c.home, h, nullptr, rx.payload.data());
  bump(lj.counters.inits_forwarded);
}

void Forwarder::ask_home_for_weights(Chunk& c) noexcept {
  const JobMath& m = plan.math;
  if (!m.ps || !hierarchical(m) || c.home == m.hub.my_rack) return;
  // At most once per RTO of the resend timer towards the home (100 ms before its first sample): the answer is
  // the whole chunk, which takes a while over a rack uplink, and each worker of the rack pulls every 5 ms
  // while it waits. Asking every millisecond had the home send the chunk again and again while its first
  // answer was still queued. A lost request or answer is asked again one RTO later.
  if (c.weights_asked_tsc != 0 && io.now_tsc - c.weights_asked_tsc < lj.hub_resend[c.home].rto()) return;
  c.weights_asked_tsc = io.now_tsc | 1;
  proto::Header h;
  h.opcode = proto::Opcode::fwd_init;
  h.dtype = m.out_dtype;
  h.job_id = plan.cfg.id;
  h.rank = m.hub.my_rack;
  h.round = newest_result(m, c).second;
  h.chunk_id = c.id;
  h.epoch = lj.epoch;
  transmit_forward(c.home, h, nullptr, nullptr);
  bump(lj.counters.weights_requested);
}

void Forwarder::on_fwd_init(RxFrame& rx, Chunk& c, uint32_t seg) noexcept {
  const JobMath& m = plan.math;
  const proto::Header& h = rx.hdr;
  const bool request = h.elem_count == 0;
  if (!request && init_segment(m, c, seg, rx.payload.data(), h.dtype) != InitResult::too_late) {
    bump(lj.counters.inits);
  }
  const uint32_t first = request ? 0 : seg;
  const uint32_t last = request ? c.segments : seg + 1;
  const auto [buffer, label] = newest_result(m, c);
  bool answered = false;
  for (uint32_t s = first; s < last; ++s) {
    if (!segment_initialized(c, s)) continue;  // rank 0's init of it has not come yet
    if (send_hub_result(c, buffer, label, s, h.rank)) bump(lj.counters.weights_sent);
    answered = true;
  }
  if (!answered) io.count_drop(lj, Drop::not_initialized);
}

void Forwarder::on_hub_weights(RxFrame& rx, Chunk& c, uint32_t seg) noexcept {
  switch (accept_weights(plan.math, c, rx.hdr.round, seg, rx.payload.data())) {
    case WeightsArrival::stored: {
      bump(lj.counters.weights_received);
      // Rank 0's own hub: the home's weights answer rank 0's init of the segment, which this hub forwarded
      // (rank 0 sends it until answered). Sent now, as a retransmit of the init would get them (the same
      // bytes the init brought, within the same limits), instead of one retransmit timeout later: that wait
      // made rank 0 push its whole init again for every chunk homed elsewhere.
      const JobMath& m = plan.math;
      if (m.hub.rack_of_rank[0] == m.hub.my_rack) {
        const auto [buffer, label] = newest_result(m, c);
        (void)job.send_segment(c, buffer, label, seg, 0);
      }
      break;
    }
    case WeightsArrival::duplicate:
      bump(lj.counters.duplicates);
      break;
    case WeightsArrival::other_round:
      io.count_drop(lj, Drop::fwd_stale);
      break;
  }
}

}  // namespace phub::engine

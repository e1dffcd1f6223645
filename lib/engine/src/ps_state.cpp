// Parameter-server jobs' hyperparameter sets and optimizer state on the wire: registering a set (hparams), and
// reading or setting a chunk's state arrays (pull and init with a StateArray in status; docs/protocol.md,
// "Hyperparameters" and "Optimizer state").
#include <algorithm>
#include <cstring>

#include "phub/base/bytes.hpp"
#include "lcore.hpp"
#include "forwarder.hpp"
#include "job_handler.hpp"
#include "messages.hpp"
#include "phub/proto/hparams.hpp"
#include "rx_frame.hpp"

namespace phub::engine {

std::optional<agg::OptimizerParams> hparams_for_job(const agg::OptimizerParams& job, const proto::Hparams& h) noexcept {
  using K = agg::OptimizerKind;
  using F = proto::HparamsFamily;
  bool fits = false;
  switch (job.kind) {
    case K::sgd: fits = h.family == F::sgd && h.momentum == 0.0 && !h.nesterov; break;
    case K::momentum: fits = h.family == F::sgd && !h.nesterov; break;
    case K::nesterov: fits = h.family == F::sgd && h.nesterov; break;
    case K::adam: fits = h.family == (job.adamw ? F::adamw : F::adam); break;
  }
  if (!fits) return std::nullopt;
  agg::OptimizerParams p = job;
  p.lr = h.lr;
  p.momentum = h.momentum;
  p.beta1 = h.beta1;
  p.beta2 = h.beta2;
  p.eps = h.eps;
  p.weight_decay = h.weight_decay;
  return p;
}

uint32_t optimizer_code(const agg::OptimizerParams& job) noexcept {
  return job.kind == agg::OptimizerKind::adam && job.adamw ? 4 : static_cast<uint32_t>(job.kind);
}

namespace {

// A header-only answer of `op` to a request, naming the hyperparameter set `id` as the request did.
proto::Header set_answer(const JobPlan& plan, const proto::Header& req, proto::Opcode op) {
  proto::Header h;
  h.opcode = op;
  h.dtype = plan.math.in_dtype;
  h.job_id = plan.cfg.id;
  h.rank = req.rank;
  h.chunk_id = req.chunk_id;
  h.elem_offset = req.elem_offset;
  h.epoch = req.epoch;
  return h;
}

}  // namespace

void JobHandler::on_hparams(RxFrame& rx) noexcept {
  // Only a ps job's workers register sets; a set is answered with a header (never more than it brought).
  if (!plan.math.ps || rx.payload.size() != proto::kHparamsBytes) {
    io.count_drop(lj, Drop::bad_request);
    return send_error(rx, proto::Status::bad_request, 0);
  }
  const uint64_t id = proto::id_of_fields(rx.hdr.chunk_id, rx.hdr.elem_offset);
  const auto wire = rx.payload.first<proto::kHparamsBytes>();
  const auto set = proto::parse_hparams(wire);
  const auto params = set ? hparams_for_job(plan.math.optimizer, *set) : std::nullopt;
  if (!params || proto::hparams_id(wire) != id) {
    // aux names the job's optimizer, so that a worker built for another one can say which it should be.
    io.count_drop(lj, Drop::hparams_refused);
    return send_error(rx, proto::Status::bad_request, optimizer_code(plan.math.optimizer));
  }
  proto::HparamsWire copy;
  std::copy(wire.begin(), wire.end(), copy.begin());
  lj.hparams.put(id, *params, copy);
  bump(lj.counters.hparams_registered);
  (void)reply(rx, set_answer(plan, rx.hdr, proto::Opcode::hparams));
}

// The piece of chunk `c` a state pull or init names: element offset and count, or false (counted, answered).
bool JobHandler::state_piece(RxFrame& rx, const Chunk& c, uint32_t& off, uint32_t& n) noexcept {
  const uint32_t piece = plan.state_piece_elems;
  off = rx.hdr.elem_offset;
  n = off < c.elems ? std::min(piece, c.elems - off) : 0;
  if (piece == 0 || off % piece != 0 || n == 0 || rx.hdr.elem_count != n) {
    io.count_drop(lj, Drop::bad_segment);
    send_error(rx, proto::Status::bad_request, piece);
    return false;
  }
  return true;
}

// The chunk a state pull or init names, when this lcore keeps the optimizer's arrays for it (a flat ps job);
// otherwise counted and answered.
Chunk* JobHandler::state_chunk(RxFrame& rx) noexcept {
  auto refuse = [&](Drop d, proto::Status s, uint32_t aux) -> Chunk* {
    io.count_drop(lj, d);
    send_error(rx, s, aux);
    return nullptr;
  };
  // A hierarchical job keeps them at each chunk's home hub, which workers do not talk to.
  if (!plan.math.ps || hierarchical(plan.math)) return refuse(Drop::bad_request, proto::Status::bad_request, 0);
  if (rx.hdr.chunk_id >= plan.layout.chunk_count()) {
    return refuse(Drop::bad_chunk, proto::Status::unknown_chunk, plan.layout.chunk_count());
  }
  const proto::ChunkInfo& ci = plan.layout.chunk(rx.hdr.chunk_id);
  if (ci.owner != plan.first_owner + io.res.index) return refuse(Drop::wrong_owner, proto::Status::bad_request, ci.owner);
  Chunk& c = lj.chunk(ci.local_index);
  if (state_array(c, static_cast<uint8_t>(rx.hdr.status)) == nullptr) {
    return refuse(Drop::bad_request, proto::Status::bad_request, optimizer_code(plan.math.optimizer));
  }
  return &c;
}

void JobHandler::on_state_pull(RxFrame& rx) noexcept {
  Chunk* cp = state_chunk(rx);
  if (cp == nullptr) return;
  Chunk& c = *cp;
  bump(lj.counters.pulls);
  if (!c.has_prev && !c.advance_pending) {
    io.count_drop(lj, Drop::not_initialized);
    return send_error(rx, proto::Status::not_initialized, 0);
  }
  // offset 0 with count 0 asks for every piece of the chunk.
  const uint32_t piece = plan.state_piece_elems;
  uint32_t first = 0, last = c.elems;
  if (!(rx.hdr.elem_offset == 0 && rx.hdr.elem_count == 0)) {
    uint32_t n = 0;
    if (!state_piece(rx, c, first, n)) return;
    last = first + n;
  }
  const auto array = static_cast<uint8_t>(rx.hdr.status);
  const float* from = state_array(c, array);
  const uint32_t label = newest_result(plan.math, c).second;
  Peer& peer = lj.peer(rx.hdr.rank);
  for (uint32_t off = first; off < last; off += piece) {
    const uint32_t n = std::min(piece, c.elems - off);
    proto::Header h;
    h.opcode = proto::Opcode::result;
    h.flags = proto::flag::tail;
    h.dtype = Dtype::fp32;
    h.status = static_cast<proto::Status>(array);
    h.job_id = plan.cfg.id;
    h.rank = rx.hdr.rank;
    h.round = label;
    h.chunk_id = c.id;
    h.elem_offset = off;
    h.elem_count = static_cast<uint16_t>(n);
    h.payload_bytes = static_cast<uint16_t>(n * sizeof(float) + proto::kTailBytes);
    h.epoch = lj.epoch;
    if (!send_copied(peer, h, reinterpret_cast<const std::byte*>(from + off), c.step)) return;
  }
}

void JobHandler::on_state_init(RxFrame& rx) noexcept {
  Chunk* cp = state_chunk(rx);
  if (cp == nullptr) return;
  Chunk& c = *cp;
  uint32_t off = 0, n = 0;
  if (rx.hdr.rank != 0 || (rx.hdr.flags & proto::flag::tail) == 0) {
    io.count_drop(lj, Drop::bad_request);
    return send_error(rx, proto::Status::bad_request, 0);
  }
  if (!state_piece(rx, c, off, n)) return;
  const auto array = static_cast<uint8_t>(rx.hdr.status);
  const uint64_t step = load_be<uint64_t>(rx.payload.data() + static_cast<size_t>(n) * sizeof(float));
  InitResult r = InitResult::too_late;
  if (array == static_cast<uint8_t>(proto::StateArray::master)) {
    // The fp32 weights themselves (a job of another dtype keeps them finer than its init can carry); the
    // previous result buffer holds them narrowed, as after a weights init.
    if (!c.trained && c.segs_done == 0) {
      std::memcpy(c.weights + off, rx.payload.data(), static_cast<size_t>(n) * sizeof(float));
      plan.math.kernels->narrow(c.out[c.cur ^ 1] + static_cast<size_t>(off) * dtype_bytes(plan.math.out_dtype),
                                c.weights + off, plan.math.out_dtype, n);
      r = InitResult::accepted;
    }
  } else {
    r = init_state(plan.math, c, array, off, n, rx.payload.data(), step);
  }
  if (r == InitResult::accepted) bump(lj.counters.state_inits);
  // Acknowledged like a state pull of the piece: the array as the server now holds it.
  proto::Header h = rx.hdr;
  h.opcode = proto::Opcode::result;
  h.flags = proto::flag::tail;
  h.round = newest_result(plan.math, c).second;
  h.epoch = lj.epoch;
  (void)send_copied(lj.peer(rx.hdr.rank), h, reinterpret_cast<const std::byte*>(state_array(c, array) + off),
                    c.step);
}

void Forwarder::send_hparams_to(uint16_t rack, uint64_t id) noexcept {
  HubHparams& at = lj.hub_hparams[rack];
  if (at.has(id)) return;
  if (at.sent_id == id && io.now_tsc - at.sent_tsc < lj.hub_resend[rack].rto()) return;
  const proto::HparamsWire* wire = lj.hparams.wire(id);
  if (wire == nullptr) return;  // (a round's set was found in the table when the round took it)
  proto::Header h = set_answer(plan, proto::Header{}, proto::Opcode::fwd_hparams);
  h.rank = plan.math.hub.my_rack;
  h.chunk_id = static_cast<uint32_t>(id >> 32);
  h.elem_offset = static_cast<uint32_t>(id);
  h.epoch = lj.epoch;
  h.payload_bytes = static_cast<uint16_t>(proto::kHparamsBytes);
  if (transmit_forward(rack, h, nullptr, wire->data())) {
    at.sent_id = id;
    at.sent_tsc = io.now_tsc;
  }
}

void Forwarder::on_fwd_hparams(RxFrame& rx) noexcept {
  // rank: the sending hub's rack (checked, with its address, as every forward's). A set goes to a chunk home;
  // the home's answer, with no payload, acknowledges it.
  const uint64_t id = proto::id_of_fields(rx.hdr.chunk_id, rx.hdr.elem_offset);
  if (!plan.math.ps) return io.count_drop(lj, Drop::unexpected_opcode);
  if (rx.payload.empty()) {
    lj.hub_hparams[rx.hdr.rank].ack(id);
    return;
  }
  const auto wire = rx.payload.first<proto::kHparamsBytes>();
  const auto set = proto::parse_hparams(wire);
  const auto params = set ? hparams_for_job(plan.math.optimizer, *set) : std::nullopt;
  if (!params || proto::hparams_id(wire) != id) return io.count_drop(lj, Drop::hparams_refused);
  proto::HparamsWire copy;
  std::copy(wire.begin(), wire.end(), copy.begin());
  lj.hparams.put(id, *params, copy);
  bump(lj.counters.hparams_registered);
  proto::Header h = set_answer(plan, rx.hdr, proto::Opcode::fwd_hparams);
  h.rank = plan.math.hub.my_rack;
  h.epoch = lj.epoch;
  (void)transmit_forward(rx.hdr.rank, h, nullptr, nullptr);
}

bool JobHandler::send_copied(Peer& peer, proto::Header h, const std::byte* elems, uint64_t tail) noexcept {
  const size_t frame_bytes = proto::kFrameHeadersBytes + h.payload_bytes;
  if (!peer.known || !within_amplification_limit(peer, frame_bytes)) return false;
  if (!lj.admit_answer(io.now_tsc, io.hz, plan.answer_bytes_per_lcore_s, frame_bytes)) {
    io.count_drop(lj, Drop::answer_rate_limited);
    return false;
  }
  const size_t elem_bytes = h.payload_bytes - ((h.flags & proto::flag::tail) != 0 ? proto::kTailBytes : 0);
  std::array<std::byte, 9216> payload;  // the largest IP MTU
  if (h.payload_bytes > payload.size()) return false;
  std::memcpy(payload.data(), elems, elem_bytes);
  if ((h.flags & proto::flag::tail) != 0) store_be<uint64_t>(payload.data() + elem_bytes, tail);
  const std::span<const std::byte> bytes(payload.data(), h.payload_bytes);
  checksum_result(h, bytes);
  h.seq = io.seq++;
  rte_mbuf* m = rte_pktmbuf_alloc(io.res.copy_pool);
  if (m == nullptr) {
    io.count_drop(lj, Drop::no_mbuf);
    return false;
  }
  if (!write_message(m, peer, h, &peer.current, bytes)) return false;
  auto* dst = rte_pktmbuf_append(m, h.payload_bytes);
  if (dst == nullptr) {
    rte_pktmbuf_free(m);
    io.count_drop(lj, Drop::no_mbuf);
    return false;
  }
  std::memcpy(dst, bytes.data(), bytes.size());
  if (!io.queue_tx(lj, peer.port, m)) return false;
  bump(lj.counters.results_sent);
  return true;
}

}  // namespace phub::engine

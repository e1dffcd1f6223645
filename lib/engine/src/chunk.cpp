// Round state machine and arithmetic of one chunk (see chunk.hpp).
#include "phub/engine/chunk.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "phub/proto/header.hpp"

namespace phub::engine {
namespace {

constexpr size_t kAlign = 64;

constexpr size_t round_up(size_t n) noexcept { return (n + kAlign - 1) / kAlign * kAlign; }

bool test_bit(const uint64_t* words, uint32_t i) noexcept { return (words[i / 64] >> (i % 64)) & 1u; }
void set_bit(uint64_t* words, uint32_t i) noexcept { words[i / 64] |= uint64_t{1} << (i % 64); }

void prefetch_for_write(const void* p, size_t bytes) noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(b + i, 1, 3);
}

// Where `round`'s running sum of the chunk is formed.
float* sum_of(const JobMath& m, Chunk& c) noexcept {
  return sums_in_result(m) ? reinterpret_cast<float*>(c.out[c.cur]) : c.acc;
}

bool needs_moment1(const JobMath& m) noexcept { return m.ps && m.optimizer.kind != agg::OptimizerKind::sgd; }
bool needs_moment2(const JobMath& m) noexcept { return m.ps && m.optimizer.kind == agg::OptimizerKind::adam; }

// dst = the staged contributions of ranks rank_at(0), rank_at(1), ... rank_at(count - 1), added left to
// right in fp32 (elements count..: a batch continues the sum of the one before it).
template <class RankAt>
void tall_of_ranks(const JobMath& m, const Chunk& c, uint16_t count, RankAt rank_at, uint32_t off, uint32_t n,
                   float* dst) noexcept {
  constexpr uint16_t kBatch = 64;
  const std::byte* srcs[kBatch];
  const size_t in_bytes = dtype_bytes(m.in_dtype);
  for (uint16_t first = 0; first < count || first == 0; first += kBatch) {
    const uint16_t k = static_cast<uint16_t>(count - first < kBatch ? count - first : kBatch);
    for (uint16_t j = 0; j < k; ++j) {
      srcs[j] = c.staging + (static_cast<size_t>(rank_at(first + j)) * c.elems + off) * in_bytes;
    }
    m.kernels->tall(dst, srcs, k, m.in_dtype, n, first == 0);
  }
}

// Sum the staged contributions of every rank in rank order into the running sum (deterministic mode).
void tall_in_rank_order(const JobMath& m, Chunk& c, uint32_t off, uint32_t n) noexcept {
  tall_of_ranks(m, c, m.workers, [](uint16_t i) { return i; }, off, n, sum_of(m, c) + off);
}

// The segment's sum is complete in the running sum: the mean or the optimizer, and the result in out[cur].
void reduce_segment(const JobMath& m, Chunk& c, uint32_t off, uint32_t n) noexcept {
  std::byte* out = c.out[c.cur] + static_cast<size_t>(off) * dtype_bytes(m.out_dtype);
  const float scale = m.mean ? 1.0f / static_cast<float>(m.workers) : 1.0f;
  if (m.ps) {
    // A round a rank declared non-finite changes nothing: its result is the weights as they are.
    if (!c.skip) {
      agg::OptimizerParams p = c.hp;
      p.step = c.step + 1;
      p.grad_scale = scale;
      m.kernels->optimize(p, c.weights + off, c.moment1 ? c.moment1 + off : nullptr,
                          c.moment2 ? c.moment2 + off : nullptr, c.acc + off, n);
      c.updated = true;
    }
    m.kernels->narrow(out, c.weights + off, m.out_dtype, n);
  } else {
    float* sum = sum_of(m, c) + off;
    if (m.mean) m.kernels->scale(sum, scale, n);
    if (!sums_in_result(m)) m.kernels->narrow(out, sum, m.out_dtype, n);
  }
  ++c.segs_done;
}

// A flat job's segment has every contribution: reduce it and write its result into out[cur].
void finish_segment(const JobMath& m, Chunk& c, uint32_t off, uint32_t n) noexcept {
  if (m.deterministic) tall_in_rank_order(m, c, off, n);
  reduce_segment(m, c, off, n);
}

bool is_home(const JobMath& m, const Chunk& c) noexcept { return hierarchical(m) && c.home == m.hub.my_rack; }

float* staged_partial(Chunk& c, uint16_t rack) noexcept {
  return c.partials + static_cast<size_t>(rack) * c.elems;
}

// Partial pieces a home waits for in segment `seg`: every other rack's.
uint32_t remote_pieces(const JobMath& m, const Chunk& c, uint32_t seg) noexcept {
  return static_cast<uint32_t>(m.hub.racks - 1) * pieces_of(m, c, seg);
}

// A home's segment has every rack's partial: add them (in rack order, deterministic mode), reduce.
void finish_home_segment(const JobMath& m, Chunk& c, uint32_t seg) noexcept {
  const uint32_t off = segment_offset(m, seg);
  const uint32_t n = segment_elems(m, c, seg);
  if (m.deterministic) {
    const float* racks[kMaxRacks];
    for (uint16_t r = 0; r < m.hub.racks; ++r) racks[r] = staged_partial(c, r) + off;
    sum_partials(*m.kernels, std::span(racks, m.hub.racks), n, sum_of(m, c) + off);
  }
  reduce_segment(m, c, off, n);
  set_bit(c.done, seg);
}

// This rack's ranks have all contributed to segment `seg` of a hierarchical job.
PushResult complete_rack_part(const JobMath& m, Chunk& c, uint32_t seg) noexcept {
  const uint32_t off = segment_offset(m, seg);
  const uint32_t n = segment_elems(m, c, seg);
  const bool home = is_home(m, c);
  if (m.deterministic) {
    rack_partial(m, c, m.hub.local_ranks, off, n, (home ? staged_partial(c, m.hub.my_rack) : sum_of(m, c)) + off);
  }
  if (!home) return PushResult::rack_complete;
  if (c.piece_counts[seg] < remote_pieces(m, c, seg)) return PushResult::accepted;
  finish_home_segment(m, c, seg);
  return PushResult::segment_complete;
}

// A ps contribution to the current round: the round takes the first one's hyperparameter set, a later one must
// name the same; any may declare the round non-finite. Nullopt when it may be counted.
std::optional<PushResult> take_intent(const JobMath& m, Chunk& c, const RoundIntent& intent) noexcept {
  if (!m.ps) return std::nullopt;
  if (!c.hp_set) {
    const agg::OptimizerParams* p = &m.optimizer;
    if (intent.hparams_id != 0) {
      p = intent.sets != nullptr ? intent.sets->find(intent.hparams_id) : nullptr;
      if (p == nullptr) return PushResult::hparams_unknown;
    }
    c.hp_set = true;
    c.hp_id = intent.hparams_id;
    c.hp = *p;
  } else if (c.hp_id != intent.hparams_id) {
    return PushResult::hparams_mismatch;
  }
  if (intent.nonfinite) c.skip = true;
  return std::nullopt;
}

// What every contribution to `round` is checked against first: nullopt when it is the chunk's round.
std::optional<PushResult> round_gate(const JobMath& m, const Chunk& c, uint32_t round) noexcept {
  if (m.round_modulus != 0 && round >= m.round_modulus) return PushResult::bad_round;
  if (!c.initialized) return PushResult::not_initialized;
  const int64_t d = round_delta(m, round, c.round);
  if (d == -1) return c.has_prev ? PushResult::previous_round : PushResult::behind;
  if (d < -1) return PushResult::behind;
  if (d > 0) return PushResult::ahead;
  return std::nullopt;
}

void clear_round_state(const JobMath& m, Chunk& c) noexcept {
  c.segs_done = 0;
  c.first_tsc = 0;
  c.stall_reported_tsc = 0;
  c.hp_set = false;
  c.hp_id = 0;
  c.skip = false;
  c.updated = false;
  c.forward_due_tsc = 0;
  c.forward_backoff_tsc = 0;
  c.forward_sent_tsc = 0;
  c.forward_samples = 0;
  std::memset(c.bits, 0, static_cast<size_t>(c.segments) * m.bitmap_words * sizeof(uint64_t));
  std::memset(c.counts, 0, static_cast<size_t>(c.segments) * sizeof(uint16_t));
  if (c.done != nullptr) std::memset(c.done, 0, (c.segments + 63) / 64 * sizeof(uint64_t));
  if (c.piece_bits != nullptr) {
    std::memset(c.piece_bits, 0, static_cast<size_t>(c.segments) * m.hub.piece_words * sizeof(uint64_t));
    std::memset(c.piece_counts, 0, static_cast<size_t>(c.segments) * sizeof(uint16_t));
  }
}

}  // namespace

void rack_partial(const JobMath& m, const Chunk& c, std::span<const uint16_t> ranks, uint32_t off, uint32_t n,
                  float* dst) noexcept {
  tall_of_ranks(m, c, static_cast<uint16_t>(ranks.size()), [&](uint16_t i) { return ranks[i]; }, off, n, dst);
}

void sum_partials(const agg::Kernels& k, std::span<const float* const> partials, uint32_t n, float* dst) noexcept {
  constexpr size_t kBatch = 64;
  const std::byte* srcs[kBatch];
  for (size_t first = 0; first < partials.size() || first == 0; first += kBatch) {
    const size_t count = std::min(partials.size() - first, kBatch);
    for (size_t j = 0; j < count; ++j) srcs[j] = reinterpret_cast<const std::byte*>(partials[first + j]);
    k.tall(dst, srcs, count, Dtype::fp32, n, first == 0);
  }
}

ChunkSizes chunk_sizes(const JobMath& m, uint32_t elems, uint32_t segments, bool homed) noexcept {
  ChunkSizes s;
  const size_t f32 = static_cast<size_t>(elems) * sizeof(float);
  s.acc = sums_in_result(m) ? 0 : round_up(f32);
  // A hierarchical ps job's optimizer runs at each chunk's home only: rack hubs keep the weights as results.
  const bool optimizes = !hierarchical(m) || homed;
  s.weights = m.ps && optimizes ? round_up(f32) : 0;
  s.moment1 = needs_moment1(m) && optimizes ? round_up(f32) : 0;
  s.moment2 = needs_moment2(m) && optimizes ? round_up(f32) : 0;
  s.staging = m.deterministic ? round_up(static_cast<size_t>(m.workers) * elems * dtype_bytes(m.in_dtype)) : 0;
  s.bits = round_up(static_cast<size_t>(segments) * m.bitmap_words * sizeof(uint64_t));
  s.counts = round_up(static_cast<size_t>(segments) * sizeof(uint16_t));
  s.init_bits = m.ps ? round_up((segments + 63) / 64 * sizeof(uint64_t)) : 0;
  if (hierarchical(m)) {
    s.done = round_up((segments + 63) / 64 * sizeof(uint64_t));
    s.piece_bits = homed ? round_up(static_cast<size_t>(segments) * m.hub.piece_words * sizeof(uint64_t)) : 0;
    s.piece_counts = homed ? round_up(static_cast<size_t>(segments) * sizeof(uint16_t)) : 0;
    s.partials = homed && m.deterministic ? round_up(static_cast<size_t>(m.hub.racks) * elems * sizeof(float)) : 0;
  }
  s.result = round_up(static_cast<size_t>(elems) * dtype_bytes(m.out_dtype));
  return s;
}

size_t carve_chunk(const JobMath& m, Chunk& c, std::byte* arena) noexcept {
  const ChunkSizes s = chunk_sizes(m, c.elems, c.segments, is_home(m, c));
  std::byte* p = arena;
  auto take = [&p](size_t bytes) {
    std::byte* q = bytes ? p : nullptr;
    p += bytes;
    return q;
  };
  c.acc = reinterpret_cast<float*>(take(s.acc));
  c.weights = reinterpret_cast<float*>(take(s.weights));
  c.moment1 = reinterpret_cast<float*>(take(s.moment1));
  c.moment2 = reinterpret_cast<float*>(take(s.moment2));
  c.staging = take(s.staging);
  c.bits = reinterpret_cast<uint64_t*>(take(s.bits));
  c.counts = reinterpret_cast<uint16_t*>(take(s.counts));
  c.init_bits = reinterpret_cast<uint64_t*>(take(s.init_bits));
  c.done = reinterpret_cast<uint64_t*>(take(s.done));
  c.piece_bits = reinterpret_cast<uint64_t*>(take(s.piece_bits));
  c.piece_counts = reinterpret_cast<uint16_t*>(take(s.piece_counts));
  c.partials = reinterpret_cast<float*>(take(s.partials));
  c.initialized = !m.ps;
  return static_cast<size_t>(p - arena);
}

int64_t round_delta(const JobMath& m, uint32_t a, uint32_t b) noexcept {
  if (m.round_modulus == 0) return static_cast<int32_t>(a - b);
  const int64_t mod = m.round_modulus;
  int64_t d = (static_cast<int64_t>(a) - static_cast<int64_t>(b)) % mod;
  if (d < 0) d += mod;
  if (d > mod / 2) d -= mod;
  return d;
}

uint32_t next_round(const JobMath& m, uint32_t r) noexcept {
  return m.round_modulus == 0 ? r + 1 : (r + 1) % m.round_modulus;
}

uint32_t prev_round(const JobMath& m, uint32_t r) noexcept {
  if (m.round_modulus == 0) return r - 1;
  return r == 0 ? m.round_modulus - 1 : r - 1;
}

bool segment_done(const JobMath& m, const Chunk& c, uint32_t seg) noexcept {
  return hierarchical(m) ? test_bit(c.done, seg) : c.counts[seg] == m.workers;
}

uint16_t pieces_of(const JobMath& m, const Chunk& c, uint32_t seg) noexcept {
  return static_cast<uint16_t>((segment_elems(m, c, seg) + m.hub.piece_elems - 1) / m.hub.piece_elems);
}

uint32_t piece_offset(const JobMath& m, uint32_t seg, uint16_t piece) noexcept {
  return segment_offset(m, seg) + static_cast<uint32_t>(piece) * m.hub.piece_elems;
}

uint32_t piece_elems(const JobMath& m, const Chunk& c, uint32_t seg, uint16_t piece) noexcept {
  const uint32_t in_seg = static_cast<uint32_t>(piece) * m.hub.piece_elems;
  const uint32_t n = segment_elems(m, c, seg);
  return in_seg >= n ? 0 : std::min(m.hub.piece_elems, n - in_seg);
}

bool contributed(const JobMath& m, const Chunk& c, uint32_t seg, uint16_t rank) noexcept {
  return test_bit(c.bits + static_cast<size_t>(seg) * m.bitmap_words, rank);
}

namespace {

uint16_t first_rank_of_rack(const JobMath& m, uint16_t rack) noexcept {
  for (uint16_t r = 0; r < m.workers; ++r) {
    if (m.hub.rack_of_rank[r] == rack) return r;
  }
  return m.workers;
}

// The first rack (other than this one) whose partial a home still misses in some segment.
uint16_t first_missing_rack(const JobMath& m, const Chunk& c) noexcept {
  for (uint16_t rack = 0; rack < m.hub.racks; ++rack) {
    if (rack == m.hub.my_rack) continue;
    for (uint32_t s = 0; s < c.segments; ++s) {
      for (uint16_t p = 0; p < pieces_of(m, c, s); ++p) {
        if (!test_bit(c.piece_bits + static_cast<size_t>(s) * m.hub.piece_words, rack * m.hub.pieces_per_segment + p)) {
          return rack;
        }
      }
    }
  }
  return m.hub.racks;
}

}  // namespace

uint16_t first_missing_rank(const JobMath& m, const Chunk& c) noexcept {
  if (!hierarchical(m)) {
    for (uint16_t r = 0; r < m.workers; ++r) {
      for (uint32_t s = 0; s < c.segments; ++s) {
        if (!contributed(m, c, s, r)) return r;
      }
    }
    return m.workers;
  }
  for (uint16_t r : m.hub.local_ranks) {
    for (uint32_t s = 0; s < c.segments; ++s) {
      if (!contributed(m, c, s, r)) return r;
    }
  }
  if (!is_home(m, c)) return first_rank_of_rack(m, c.home);
  const uint16_t rack = first_missing_rack(m, c);
  return rack == m.hub.racks ? m.workers : first_rank_of_rack(m, rack);
}

PushResult contribute(const JobMath& m, Chunk& c, uint16_t rank, uint32_t round, uint32_t seg,
                      const std::byte* payload, uint64_t now_tsc, const RoundIntent& intent) noexcept {
  if (const auto gate = round_gate(m, c, round)) return *gate;

  uint64_t* bits = c.bits + static_cast<size_t>(seg) * m.bitmap_words;
  if (test_bit(bits, rank)) return segment_done(m, c, seg) ? PushResult::duplicate_complete : PushResult::duplicate;
  if (const auto refused = take_intent(m, c, intent)) return *refused;
  set_bit(bits, rank);
  const uint16_t count = ++c.counts[seg];
  if (c.first_tsc == 0) c.first_tsc = now_tsc | 1;  // never 0 once started

  const uint32_t off = segment_offset(m, seg);
  const uint32_t n = segment_elems(m, c, seg);
  if (m.deterministic) {
    const size_t in_bytes = dtype_bytes(m.in_dtype);
    std::memcpy(c.staging + (static_cast<size_t>(rank) * c.elems + off) * in_bytes, payload, n * in_bytes);
  } else if (count == 1 && (c.piece_counts == nullptr || c.piece_counts[seg] == 0)) {
    float* sum = sum_of(m, c);
    m.kernels->init(sum + off, payload, m.in_dtype, n);
    // Workers push a chunk's segments in order: the next segment's first push follows soon, and its
    // running sum (untouched since an earlier round) is likely out of the cache by now.
    if (seg + 1 < c.segments) prefetch_for_write(sum + off + n, segment_elems(m, c, seg + 1) * sizeof(float));
  } else {
    m.kernels->accumulate(sum_of(m, c) + off, payload, m.in_dtype, n);
  }
  if (count < local_workers(m)) return PushResult::accepted;
  if (hierarchical(m)) return complete_rack_part(m, c, seg);
  finish_segment(m, c, off, n);
  return PushResult::segment_complete;
}

PushResult contribute_partial(const JobMath& m, Chunk& c, uint16_t rack, uint32_t round, uint32_t seg,
                              uint16_t piece, const std::byte* payload, uint64_t now_tsc,
                              const RoundIntent& intent) noexcept {
  if (const auto gate = round_gate(m, c, round)) return *gate;
  uint64_t* bits = c.piece_bits + static_cast<size_t>(seg) * m.hub.piece_words;
  const uint32_t bit = static_cast<uint32_t>(rack) * m.hub.pieces_per_segment + piece;
  if (test_bit(bits, bit)) return segment_done(m, c, seg) ? PushResult::duplicate_complete : PushResult::duplicate;
  if (const auto refused = take_intent(m, c, intent)) return *refused;
  set_bit(bits, bit);
  const bool sum_started = c.counts[seg] != 0 || c.piece_counts[seg] != 0;
  ++c.piece_counts[seg];
  if (c.first_tsc == 0) c.first_tsc = now_tsc | 1;

  const uint32_t off = piece_offset(m, seg, piece);
  const uint32_t n = piece_elems(m, c, seg, piece);
  if (m.deterministic) {
    std::memcpy(staged_partial(c, rack) + off, payload, n * sizeof(float));
  } else {
    float* sum = sum_of(m, c);
    // The first contribution of any kind starts the segment's sum: from zero, as a piece covers only part.
    if (!sum_started) std::memset(sum + segment_offset(m, seg), 0, segment_elems(m, c, seg) * sizeof(float));
    m.kernels->accumulate(sum + off, payload, Dtype::fp32, n);
  }
  if (!locally_complete(m, c, seg) || c.piece_counts[seg] < remote_pieces(m, c, seg)) return PushResult::accepted;
  finish_home_segment(m, c, seg);
  return PushResult::segment_complete;
}

ResultArrival accept_result(const JobMath& m, Chunk& c, uint32_t round, uint32_t seg, const std::byte* payload) noexcept {
  if (round != c.round) return ResultArrival::other_round;
  if (!locally_complete(m, c, seg)) return ResultArrival::not_forwarded;
  if (test_bit(c.done, seg)) return ResultArrival::duplicate;
  const size_t bytes = dtype_bytes(m.out_dtype);
  std::memcpy(c.out[c.cur] + static_cast<size_t>(segment_offset(m, seg)) * bytes, payload,
              segment_elems(m, c, seg) * bytes);
  set_bit(c.done, seg);
  ++c.segs_done;
  return ResultArrival::completed;
}

bool segment_initialized(const Chunk& c, uint32_t seg) noexcept { return test_bit(c.init_bits, seg); }

WeightsArrival accept_weights(const JobMath& m, Chunk& c, uint32_t round, uint32_t seg, const std::byte* payload) noexcept {
  if (round != prev_round(m, c.round)) return WeightsArrival::other_round;
  if (test_bit(c.init_bits, seg)) return WeightsArrival::duplicate;  // an answer to an earlier ask, or later rounds
  const size_t bytes = dtype_bytes(m.out_dtype);
  std::memcpy(c.out[c.cur ^ 1] + static_cast<size_t>(segment_offset(m, seg)) * bytes, payload,
              segment_elems(m, c, seg) * bytes);
  set_bit(c.init_bits, seg);
  if (++c.init_segs == c.segments) {
    c.initialized = true;
    c.has_prev = true;
  }
  return WeightsArrival::stored;
}

void advance_round(const JobMath& m, Chunk& c) noexcept {
  c.round = next_round(m, c.round);
  c.cur ^= 1;
  c.has_prev = true;
  // A round that updated nothing (skipped: a rank declared it non-finite) leaves the step count, which Adam's
  // bias correction and the momentum buffer's start use, where it was.
  if (m.ps && c.updated) {
    ++c.step;
    c.trained = true;
  }
  c.prev_skipped = c.skip;
  clear_round_state(m, c);
}

void restart_chunk(const JobMath& m, Chunk& c, bool fresh_weights) noexcept {
  c.advance_pending = false;
  c.round = 0;
  c.prev_skipped = false;
  clear_round_state(m, c);
  if (!m.ps) {
    c.has_prev = false;
    return;
  }
  if (fresh_weights) {
    c.initialized = false;
    c.has_prev = false;
    c.init_segs = 0;
    c.step = 0;
    c.trained = false;
    c.state_loaded = false;
    std::memset(c.init_bits, 0, (c.segments + 63) / 64 * sizeof(uint64_t));
    return;
  }
  // Segments of an unfinished round may have been updated already: the weights are what they are now. (A rack
  // hub of a chunk homed elsewhere has no optimizer state: what a pull returns stays the last result.)
  if (c.initialized && c.weights != nullptr) m.kernels->narrow(c.out[c.cur ^ 1], c.weights, m.out_dtype, c.elems);
  c.has_prev = c.initialized;
}

InitResult init_segment(const JobMath& m, Chunk& c, uint32_t seg, const std::byte* payload, Dtype d) noexcept {
  if (!m.ps) return InitResult::bad_request;
  if (c.trained || c.segs_done > 0) return InitResult::too_late;
  const uint32_t off = segment_offset(m, seg);
  const uint32_t n = segment_elems(m, c, seg);
  m.kernels->init(c.weights + off, payload, d, n);
  if (!c.state_loaded) {
    if (c.moment1) std::memset(c.moment1 + off, 0, n * sizeof(float));
    if (c.moment2) std::memset(c.moment2 + off, 0, n * sizeof(float));
  }
  // The previous-result buffer holds the current weights (what a pull returns).
  m.kernels->narrow(c.out[c.cur ^ 1] + static_cast<size_t>(off) * dtype_bytes(m.out_dtype), c.weights + off,
                    m.out_dtype, n);
  if (!test_bit(c.init_bits, seg)) {
    set_bit(c.init_bits, seg);
    if (++c.init_segs == c.segments) {
      c.initialized = true;
      c.has_prev = true;
      return InitResult::chunk_initialized;
    }
  }
  return InitResult::accepted;
}

InitResult init_state(const JobMath& m, Chunk& c, uint8_t array, uint32_t off, uint32_t n, const std::byte* payload,
                      uint64_t step) noexcept {
  float* to = array == static_cast<uint8_t>(proto::StateArray::moment1)   ? c.moment1
              : array == static_cast<uint8_t>(proto::StateArray::moment2) ? c.moment2
                                                                            : nullptr;
  if (!m.ps || to == nullptr || off > c.elems || n > c.elems - off) return InitResult::bad_request;
  if (c.trained || c.segs_done > 0) return InitResult::too_late;
  std::memcpy(to + off, payload, static_cast<size_t>(n) * sizeof(float));
  c.step = step;
  c.state_loaded = true;
  return InitResult::accepted;
}

const float* state_array(const Chunk& c, uint8_t array) noexcept {
  switch (static_cast<proto::StateArray>(array)) {
    case proto::StateArray::master: return c.weights;
    case proto::StateArray::moment1: return c.moment1;
    case proto::StateArray::moment2: return c.moment2;
    case proto::StateArray::weights: break;
  }
  return nullptr;
}

}  // namespace phub::engine

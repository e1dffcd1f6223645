// One chunk's round state and arithmetic: contribution bitmaps, zero-copy accumulation, segment
// completion (mean, optimizer, narrowing into the result buffer) and round advance. No DPDK, no locks:
// a chunk is only ever touched by its owning lcore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "phub/agg/kernels.hpp"
#include "phub/base/dtype.hpp"
#include "phub/engine/hparams_table.hpp"
#include "phub/proto/homes.hpp"

namespace phub::engine {

// The most racks a hierarchical job may span (a home adds their partials from one array of pointers).
inline constexpr uint16_t kMaxRacks = 256;

// A hierarchical job's shape, as the chunk arithmetic needs it (docs/hierarchy.md). Points into the job's
// HubPlan. racks == 0: a flat job.
struct HubMath {
  uint16_t racks = 0;
  uint16_t my_rack = 0;                   // this hub's rack index
  std::span<const uint16_t> local_ranks;  // the ranks of this hub's rack, increasing (the summation order)
  std::span<const uint16_t> rack_of_rank; // by rank
  const proto::HomeMap* homes = nullptr;  // chunk -> home rack index
  uint32_t piece_elems = 0;               // elements per fwd_partial piece
  uint16_t pieces_per_segment = 1;
  uint16_t piece_words = 0;               // ceil(racks * pieces_per_segment / 64): one segment's (rack, piece) bits
};

// What every chunk of one job shares (immutable while the job runs).
struct JobMath {
  const agg::Kernels* kernels = nullptr;
  uint16_t workers = 1;          // contributors per round
  uint16_t bitmap_words = 1;     // ceil(workers / 64)
  Dtype in_dtype = Dtype::fp32;  // pushed elements
  Dtype out_dtype = Dtype::fp32; // result elements
  bool ps = false;               // parameter-server mode: results are updated weights
  bool mean = false;             // allreduce: divide by workers
  bool deterministic = false;    // sum in rank order from per-rank staging
  uint32_t segment_elems = 352;  // elements per packet
  uint32_t round_modulus = 0;    // 0: rounds wrap at 2^32
  agg::OptimizerParams optimizer;  // ps mode; step and grad_scale are set per update
  HubMath hub;
};

[[nodiscard]] constexpr bool hierarchical(const JobMath& m) noexcept { return m.hub.racks != 0; }
// The ranks that push to this server: every worker, or this rack's on a hierarchical job.
[[nodiscard]] constexpr uint16_t local_workers(const JobMath& m) noexcept {
  return hierarchical(m) ? static_cast<uint16_t>(m.hub.local_ranks.size()) : m.workers;
}

// fp32 allreduce: the running sum is formed in the round's result buffer out[cur] itself, so a chunk
// has no separate accumulator and a completed segment needs no copy into its result. (Elsewhere the
// result differs from the fp32 sum: narrowed to bf16/fp16, or the weights the optimizer produced.)
constexpr bool sums_in_result(const JobMath& m) noexcept { return !m.ps && m.out_dtype == Dtype::fp32; }

// The memory of one chunk, carved by the owner from its arena (sizes in ChunkSizes).
struct Chunk {
  uint32_t id = 0;
  uint32_t elems = 0;
  uint32_t segments = 0;

  uint32_t round = 0;          // the round being accumulated
  uint32_t segs_done = 0;      // segments of `round` complete
  uint8_t cur = 0;             // out[cur]: results of `round`; out[cur ^ 1]: results of the previous round
  bool has_prev = false;       // out[cur ^ 1] holds a result (the previous round, or ps initial weights)
  bool advance_pending = false;  // `round` is complete; its advance waits for a free result buffer
  bool initialized = false;    // ps: all segments initialised by rank 0
  uint32_t init_segs = 0;      // ps: segments initialised so far
  uint64_t step = 0;           // ps: optimizer updates applied (rounds that updated the chunk; set by a state init)
  bool trained = false;        // ps: an update ran since the weights were set: an init now comes too late
  bool state_loaded = false;   // ps: a state init set moments (a weights init then leaves them as they are)
  // ps: the current round's optimizer settings (docs/protocol.md, "Hyperparameters"). Its first contribution
  // fixes the hyperparameter set (hp_id 0: the job's configured optimizer); a rank that declared the round
  // non-finite makes it skip; `updated` once a segment of it was updated (the step count then advances).
  bool hp_set = false;
  bool skip = false;
  bool updated = false;
  bool prev_skipped = false;   // ps: the round whose result out[cur ^ 1] holds was skipped
  uint64_t hp_id = 0;
  agg::OptimizerParams hp;
  uint64_t first_tsc = 0;      // first contribution of `round` (0: none yet)
  uint64_t stall_reported_tsc = 0;
  uint16_t home = 0;                 // hierarchical: the rack index of the chunk's home hub
  uint64_t forward_due_tsc = 0;      // rack hub: when the pieces still unanswered are sent again (0: none)
  uint64_t forward_backoff_tsc = 0;  // rack hub: the wait before that resend, doubled after each one
  uint64_t forward_sent_tsc = 0;     // rack hub: this wait's first partial went out (0: none, or resent)
  uint64_t forward_samples = 0;      // rack hub: the home's resend timer's samples() when this wait began
  uint64_t weights_asked_tsc = 0;    // ps rack hub: when it last asked the home for the chunk's weights

  float* acc = nullptr;        // elems fp32: the running sum (null where it is kept in out[cur], see sums_in_result)
  float* weights = nullptr;    // ps (flat, or the chunk's home): elems fp32
  float* moment1 = nullptr;    // ps momentum/nesterov/adam (flat, or home): elems fp32
  float* moment2 = nullptr;    // ps adam (flat, or home): elems fp32
  std::byte* staging = nullptr;  // deterministic: workers x elems x in_dtype bytes
  uint64_t* bits = nullptr;      // segments x bitmap_words: who contributed to each segment this round
  uint16_t* counts = nullptr;    // segments: contributions this round
  uint64_t* init_bits = nullptr; // ps: ceil(segments / 64) words: segments initialised
  uint64_t* done = nullptr;        // hierarchical: ceil(segments / 64) words: segments whose result is in out[cur]
  uint64_t* piece_bits = nullptr;  // home: segments x piece_words: the (rack, piece) partials counted this round
  uint16_t* piece_counts = nullptr;  // home: segments: partial pieces counted this round
  float* partials = nullptr;       // home, deterministic: racks x elems fp32: each rack's partial, staged
  std::byte* out[2] = {nullptr, nullptr};  // results in out_dtype (result buffers, see ResultPool)
  void* out_handle[2] = {nullptr, nullptr};  // the owner's handle for each result buffer
};

// Bytes of each per-chunk array, for arena carving and the memory formula.
struct ChunkSizes {
  size_t acc = 0, weights = 0, moment1 = 0, moment2 = 0, staging = 0, bits = 0, counts = 0, init_bits = 0;
  size_t done = 0, piece_bits = 0, piece_counts = 0, partials = 0;  // hierarchical jobs
  size_t result = 0;  // one result buffer
  [[nodiscard]] size_t arena_total() const noexcept {
    return acc + weights + moment1 + moment2 + staging + bits + counts + init_bits + done + piece_bits +
           piece_counts + partials;
  }
};

// Whether this hub is the home of chunk `id` (never on a flat job).
[[nodiscard]] inline bool homed_here(const JobMath& m, uint32_t id) noexcept {
  return m.hub.racks != 0 && m.hub.homes->home(id) == m.hub.my_rack;
}

// `homed`: this hub is the chunk's home (homed_here), which stages the racks' partials.
[[nodiscard]] ChunkSizes chunk_sizes(const JobMath& m, uint32_t elems, uint32_t segments, bool homed) noexcept;

// Carve a chunk's arrays from `arena` (64-byte aligned pieces, zeroed by the caller), c.home already set.
// Returns the bytes used.
size_t carve_chunk(const JobMath& m, Chunk& c, std::byte* arena) noexcept;

// What a ps contribution says of its round besides its elements: the hyperparameter set it names (id 0 and
// null: the job's configured optimizer), and whether its rank declared the round non-finite (flag::nonfinite).
struct RoundIntent {
  uint64_t hparams_id = 0;
  HparamsTable* sets = nullptr;  // where the round's first contribution finds the set's values (id != 0)
  bool nonfinite = false;
};

enum class PushResult : uint8_t {
  accepted,            // counted; segment not complete yet
  segment_complete,    // counted and it completed the segment: send out[cur] segment to every worker (and, at a
                       // home, to every other rack's hub)
  rack_complete,       // hierarchical, homed elsewhere: counted, and this rack's partial of the segment is ready
                       // in forward_source(): send its pieces to the home
  duplicate,           // already counted this round; nothing to send
  duplicate_complete,  // already counted and the segment is complete: resend out[cur] segment to the sender
  previous_round,      // a push for the previous round: resend out[cur ^ 1] segment to the sender
  ahead,               // beyond the current round
  behind,              // older than the kept result
  not_initialized,     // ps weights not initialised yet
  bad_round,           // round >= round_modulus
  hparams_unknown,     // ps: the round's first contribution names a set the lcore does not hold; not counted
  hparams_mismatch,    // ps: names another hyperparameter set than the round's first contribution did; not counted
};
// The push was summed, or is a duplicate answered again (the results before `ahead`); the rest are refused.
[[nodiscard]] constexpr bool push_taken(PushResult r) noexcept { return r < PushResult::ahead; }

// Rounds compared modulo JobMath::round_modulus: the signed distance a - b, centred on 0.
[[nodiscard]] int64_t round_delta(const JobMath& m, uint32_t a, uint32_t b) noexcept;
[[nodiscard]] uint32_t next_round(const JobMath& m, uint32_t r) noexcept;
[[nodiscard]] uint32_t prev_round(const JobMath& m, uint32_t r) noexcept;

// Count rank's contribution `payload` (n elements of in_dtype at element `offset` of segment `seg`) towards
// `round`. On segment_complete the segment's result is already in out[cur]. A ps job's contribution brings its
// RoundIntent (see there).
[[nodiscard]] PushResult contribute(const JobMath& m, Chunk& c, uint16_t rank, uint32_t round, uint32_t seg,
                                    const std::byte* payload, uint64_t now_tsc, const RoundIntent& intent = {}) noexcept;

// The home counts one rack's fp32 partial of piece `piece` of segment `seg` towards `round` (payload: the
// piece's elements). The same answers as contribute (rack_complete excepted).
[[nodiscard]] PushResult contribute_partial(const JobMath& m, Chunk& c, uint16_t rack, uint32_t round, uint32_t seg,
                                            uint16_t piece, const std::byte* payload, uint64_t now_tsc,
                                            const RoundIntent& intent = {}) noexcept;

// Whether the round whose result out[buf] holds was skipped (ps: a rank declared it non-finite).
[[nodiscard]] inline bool result_skipped(const Chunk& c, int buf) noexcept {
  return buf == c.cur ? c.skip : c.prev_skipped;
}

enum class ResultArrival : uint8_t {
  completed,      // written into out[cur]: the segment is done; send it to this rack's workers
  duplicate,      // the segment already has its result
  other_round,    // not the chunk's current round
  not_forwarded,  // this rack has not completed (so not forwarded) the segment: no result can be due
};
// A rack hub takes the home's result of segment `seg` (payload: the segment in out_dtype) for `round`.
[[nodiscard]] ResultArrival accept_result(const JobMath& m, Chunk& c, uint32_t round, uint32_t seg,
                                          const std::byte* payload) noexcept;

// Hierarchical: whether this rack's ranks all contributed to segment `seg` (its partial is complete).
[[nodiscard]] inline bool locally_complete(const JobMath& m, const Chunk& c, uint32_t seg) noexcept {
  return c.counts[seg] == local_workers(m);
}
// A rack hub's partial, where forwards are sent from: out[cur] (sums_in_result) or the accumulator.
[[nodiscard]] inline const float* forward_source(const JobMath& m, const Chunk& c) noexcept {
  return sums_in_result(m) ? reinterpret_cast<const float*>(c.out[c.cur]) : c.acc;
}

// True when every segment of the current round is complete: the caller must then call advance_round.
[[nodiscard]] inline bool round_complete(const Chunk& c) noexcept { return c.segs_done == c.segments; }

// Start the next round: out[cur] becomes the previous result. The caller has made sure that
// out[cur ^ 1] (about to be overwritten) is free or replaced it.
void advance_round(const JobMath& m, Chunk& c) noexcept;

// A new job epoch: the chunk starts again at round 0 with no contribution counted. Allreduce chunks forget
// their results; a ps chunk keeps its weights, optimizer state and step count (written into out[cur ^ 1],
// what a pull returns), unless `fresh_weights`: then it waits for rank 0's init again. The caller has
// made sure that out[cur ^ 1] is not referenced by a transmit.
void restart_chunk(const JobMath& m, Chunk& c, bool fresh_weights) noexcept;

// ps on a hierarchical job: whether segment `seg` has its weights (from rank 0's init at the chunk's home, from
// the home's answer at a rack hub).
[[nodiscard]] bool segment_initialized(const Chunk& c, uint32_t seg) noexcept;

// The newest complete state of a chunk, as (result buffer, round label): the previous round's result, or
// the current round's while its advance is deferred (advance_pending: complete, not advanced yet).
[[nodiscard]] inline std::pair<int, uint32_t> newest_result(const JobMath& m, const Chunk& c) noexcept {
  if (c.advance_pending) return {c.cur, c.round};
  return {c.cur ^ 1, prev_round(m, c.round)};
}

enum class WeightsArrival : uint8_t {
  stored,       // written where a pull reads (out[cur ^ 1]); the chunk is initialised once every segment is
  duplicate,    // the segment has its weights already (from an earlier answer; later rounds bring results)
  other_round,  // not labelled with the round before the chunk's current one
};
// ps, a rack hub of a chunk homed elsewhere: the home's weights of segment `seg` (payload: the segment in
// out_dtype), its answer to a forwarded init or a weights request, labelled `round`.
[[nodiscard]] WeightsArrival accept_weights(const JobMath& m, Chunk& c, uint32_t round, uint32_t seg,
                                            const std::byte* payload) noexcept;

enum class InitResult : uint8_t { accepted, chunk_initialized, too_late, bad_request };

// ps mode: rank 0 sets the initial weights of a segment. Allowed until the first update; re-sending is fine.
// The payload holds the segment's elements in dtype `d` (fp32 recommended: weights are kept in fp32). The
// moments are zeroed unless a state init set them (init_state).
[[nodiscard]] InitResult init_segment(const JobMath& m, Chunk& c, uint32_t seg, const std::byte* payload,
                                      Dtype d) noexcept;

// ps mode: rank 0 sets `n` elements from element `off` of an optimizer state array (proto::StateArray moment1 or
// moment2; payload fp32) and the chunk's step count, restoring an optimizer's state (PSOptimizer.load_state_dict)
// before the weights' init. Allowed until the first update; bad_request for an array the job's optimizer has
// not, or a range outside the chunk.
[[nodiscard]] InitResult init_state(const JobMath& m, Chunk& c, uint8_t array, uint32_t off, uint32_t n,
                                    const std::byte* payload, uint64_t step) noexcept;
// The fp32 array a state pull reads (master weights, moments; null where the chunk keeps none).
[[nodiscard]] const float* state_array(const Chunk& c, uint8_t array) noexcept;

// The two levels of a hierarchical job's deterministic sum (docs/hierarchy.md, "Summation order").
// A rack's partial of elements [off, off + n): the staged contributions of `ranks` (the rack's ranks, in
// increasing order), added left to right in fp32 into dst.
void rack_partial(const JobMath& m, const Chunk& c, std::span<const uint16_t> ranks, uint32_t off, uint32_t n,
                  float* dst) noexcept;
// The home's total: the racks' fp32 partials in rack order, added left to right into dst.
void sum_partials(const agg::Kernels& k, std::span<const float* const> partials, uint32_t n, float* dst) noexcept;

// Whether `rank` contributed to segment `seg` this round, and the first rank missing from any segment
// (workers if none). On a hierarchical job: the first of this rack's ranks missing, else the first rank of
// a rack whose partial is missing (at the home) or of the home's rack (waiting for its result).
[[nodiscard]] bool contributed(const JobMath& m, const Chunk& c, uint32_t seg, uint16_t rank) noexcept;
[[nodiscard]] uint16_t first_missing_rank(const JobMath& m, const Chunk& c) noexcept;
[[nodiscard]] bool segment_done(const JobMath& m, const Chunk& c, uint32_t seg) noexcept;

// Pieces of segment `seg` (docs/hierarchy.md, "Pieces"), and the chunk element offset and count of one.
[[nodiscard]] uint16_t pieces_of(const JobMath& m, const Chunk& c, uint32_t seg) noexcept;
[[nodiscard]] uint32_t piece_offset(const JobMath& m, uint32_t seg, uint16_t piece) noexcept;
[[nodiscard]] uint32_t piece_elems(const JobMath& m, const Chunk& c, uint32_t seg, uint16_t piece) noexcept;

// Element offset and count of segment `seg`.
[[nodiscard]] inline uint32_t segment_offset(const JobMath& m, uint32_t seg) noexcept { return seg * m.segment_elems; }
[[nodiscard]] inline uint32_t segment_elems(const JobMath& m, const Chunk& c, uint32_t seg) noexcept {
  const uint32_t off = segment_offset(m, seg);
  return off >= c.elems ? 0 : (c.elems - off < m.segment_elems ? c.elems - off : m.segment_elems);
}

}  // namespace phub::engine

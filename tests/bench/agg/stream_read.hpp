// The benchmark's memory limit: a pure streaming read of the same buffers, one build per ISA.
#pragma once

#include <cstddef>
#include <cstdint>

namespace phub::agg::bench {

// Reads `bytes` from each of bufs[0..k) (64-byte aligned; bytes a multiple of 4 vectors) and folds them into a
// value the caller must consume. in_sequence: buffer after buffer; otherwise k <= 8 buffers in lockstep, as tall
// reads them.
using StreamReadFn = uint64_t (*)(const std::byte* const* bufs, size_t k, size_t bytes, bool in_sequence);

uint64_t stream_read_base(const std::byte* const* bufs, size_t k, size_t bytes, bool in_sequence);
uint64_t stream_read_avx2(const std::byte* const* bufs, size_t k, size_t bytes, bool in_sequence);
uint64_t stream_read_avx512(const std::byte* const* bufs, size_t k, size_t bytes, bool in_sequence);

}  // namespace phub::agg::bench

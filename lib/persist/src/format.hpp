// The checkpoint file format (docs/persistence.md), shared by the writer and the parser.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace phub::persist::format {

// Header, little-endian:
//   0 magic "PHUBCKPT" | 8 version u32 | 12 header_bytes u32 | 16 job_id u16 | 18 shard u16 | 20 epoch u16
//   22 name_len u16 | 24 fingerprint u64 | 32 round u32 | 36 arrays u32 | 40 elems u64
//   48 block_raw_bytes u32 | 52 blocks u32 | 56 step u64 | 64 name (name_len bytes) | then header CRC32C u32
// Blocks, each: raw_len u32 | stored_len u32 | kind u32 (0 stored, 1 deflate) | crc32c of the raw bytes u32
//   | stored_len bytes. Every block but the last holds block_raw_bytes raw bytes.
// Trailer: magic "PHUBEND1" | blocks u32 | crc32c u32 over, for each block, its CRC and the CRC32C of its
//   stored bytes (u32 each; version 2: deflate ignores the padding bits after a stream's end) | mac u64:
//   SipHash-2-4 under the job's checkpoint key of every byte of the file before it (version 3).
inline constexpr std::array<char, 8> kMagic{'P', 'H', 'U', 'B', 'C', 'K', 'P', 'T'};
inline constexpr std::array<char, 8> kTrailerMagic{'P', 'H', 'U', 'B', 'E', 'N', 'D', '1'};
inline constexpr uint32_t kVersion = 3;  // 2 added the optimizer step, 3 the file's MAC
inline constexpr size_t kFixedHeaderBytes = 64;
inline constexpr size_t kBlockHeaderBytes = 16;
inline constexpr size_t kMacBytes = 8;
inline constexpr size_t kTrailerBytes = 16 + kMacBytes;
inline constexpr uint32_t kKindStored = 0;
inline constexpr uint32_t kKindDeflate = 1;

inline constexpr uint32_t kBlockRawBytes = 1u << 20;  // what the writer uses
inline constexpr uint32_t kMinBlockRawBytes = 4096;   // what a reader accepts
inline constexpr uint32_t kMaxBlockRawBytes = 64u << 20;
inline constexpr uint32_t kMaxArrays = 16;
inline constexpr uint64_t kMaxRawBytes = uint64_t{1} << 40;
inline constexpr size_t kMaxNameBytes = 64;

}  // namespace phub::persist::format

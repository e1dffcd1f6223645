// parse_checkpoint and read_checkpoint: every length is checked against the bytes that are there and
// the format's limits before it is used; every block's CRC32C is checked after it is inflated.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "codec.hpp"
#include "format.hpp"
#include "mac.hpp"
#include "phub/base/bytes.hpp"
#include "phub/persist/checkpoint.hpp"
#include "phub/proto/auth.hpp"

namespace phub::persist {
namespace {

using Bytes = std::span<const std::byte>;

Expected<Checkpoint, std::string> bad(const std::string& why) { return unexpected(why); }

}  // namespace

Expected<Checkpoint, std::string> parse_checkpoint(Bytes f, const CheckpointKey& key, const Expectation* expect) {
  if (f.size() < format::kFixedHeaderBytes + 4) return bad("shorter than a header (" + std::to_string(f.size()) + " bytes)");
  if (std::memcmp(f.data(), format::kMagic.data(), format::kMagic.size()) != 0) return bad("not a phub checkpoint (magic)");
  const auto version = load_le<uint32_t>(f.data() + 8);
  if (version != format::kVersion) return bad("format version " + std::to_string(version) + ", this server reads " + std::to_string(format::kVersion));
  const auto header_bytes = load_le<uint32_t>(f.data() + 12);
  const auto name_len = load_le<uint16_t>(f.data() + 22);
  if (name_len == 0 || name_len > format::kMaxNameBytes || header_bytes != format::kFixedHeaderBytes + name_len + 4 ||
      header_bytes > f.size()) {
    return bad("torn or corrupt header (its length)");
  }
  if (proto::crc32c(f.first(header_bytes - 4)) != load_le<uint32_t>(f.data() + header_bytes - 4)) {
    return bad("header CRC32C mismatch");
  }
  Checkpoint cp;
  auto& m = cp.meta;
  m.id.job_id = load_le<uint16_t>(f.data() + 16);
  m.id.shard_index = load_le<uint16_t>(f.data() + 18);
  m.epoch = load_le<uint16_t>(f.data() + 20);
  m.id.config_fingerprint = load_le<uint64_t>(f.data() + 24);
  m.round = load_le<uint32_t>(f.data() + 32);
  const auto arrays = load_le<uint32_t>(f.data() + 36);
  m.elems = load_le<uint64_t>(f.data() + 40);
  const auto block_raw = load_le<uint32_t>(f.data() + 48);
  const auto blocks = load_le<uint32_t>(f.data() + 52);
  m.step = load_le<uint64_t>(f.data() + 56);
  m.id.job.assign(reinterpret_cast<const char*>(f.data() + format::kFixedHeaderBytes), name_len);
  if (arrays == 0 || arrays > format::kMaxArrays) return bad(std::to_string(arrays) + " arrays in the header");
  if (m.elems > format::kMaxRawBytes / 4 / arrays) return bad("the header's element count is above the limit");
  if (expect != nullptr) {
    if (!(m.id == expect->id)) {
      return bad("of another job, shard or config (fingerprint " + std::to_string(m.id.config_fingerprint) +
                 ", running " + std::to_string(expect->id.config_fingerprint) + ")");
    }
    if ((expect->arrays != 0 && arrays != expect->arrays) || (expect->elems != 0 && m.elems != expect->elems)) {
      return bad(std::to_string(arrays) + " arrays of " + std::to_string(m.elems) + " elements, the job has " +
                 std::to_string(expect->arrays) + " of " + std::to_string(expect->elems));
    }
  }
  if (block_raw < format::kMinBlockRawBytes || block_raw > format::kMaxBlockRawBytes) {
    return bad("block size " + std::to_string(block_raw) + " outside the format's limits");
  }
  const uint64_t raw_total = m.elems * 4 * arrays;
  if (blocks != (raw_total + block_raw - 1) / block_raw) return bad("block count does not match the state's size");
  // Every block takes at least its header: a count the file cannot hold is refused before allocating.
  if (uint64_t{blocks} * format::kBlockHeaderBytes > f.size() - header_bytes) {
    return bad("torn: " + std::to_string(blocks) + " blocks do not fit in " + std::to_string(f.size()) + " bytes");
  }

  // The arrays grow as verified blocks fill them, never ahead of the data: a forged header cannot make
  // the reader allocate more than the file's blocks really inflate to.
  cp.arrays.resize(arrays);
  std::vector<std::byte> raw(block_raw);
  std::vector<std::byte> crcs(uint64_t{blocks} * 8);
  size_t at = header_bytes;
  uint64_t offset = 0;  // raw bytes so far
  for (uint32_t b = 0; b < blocks; ++b) {
    if (f.size() - at < format::kBlockHeaderBytes) return bad("torn: block " + std::to_string(b) + " is missing");
    const auto raw_len = load_le<uint32_t>(f.data() + at);
    const auto stored_len = load_le<uint32_t>(f.data() + at + 4);
    const auto kind = load_le<uint32_t>(f.data() + at + 8);
    const auto crc = load_le<uint32_t>(f.data() + at + 12);
    at += format::kBlockHeaderBytes;
    const uint64_t want = std::min<uint64_t>(block_raw, raw_total - offset);
    if (raw_len != want) return bad("block " + std::to_string(b) + ": length " + std::to_string(raw_len) +
                                    ", expected " + std::to_string(want));
    if (stored_len > f.size() - at) return bad("torn: block " + std::to_string(b) + " ends past the file");
    Bytes stored = f.subspan(at, stored_len);
    std::span<std::byte> out(raw.data(), raw_len);
    if (kind == format::kKindStored) {
      if (stored_len != raw_len) return bad("block " + std::to_string(b) + ": stored length mismatch");
      std::memcpy(out.data(), stored.data(), raw_len);
    } else if (kind == format::kKindDeflate) {
      if (!inflate_block(stored, out)) return bad("block " + std::to_string(b) + ": igzip could not inflate it");
    } else {
      return bad("block " + std::to_string(b) + ": unknown kind " + std::to_string(kind));
    }
    if (proto::crc32c(out) != crc) return bad("block " + std::to_string(b) + ": CRC32C mismatch");
    store_le<uint32_t>(crcs.data() + uint64_t{b} * 8, crc);
    // The stored bytes too: deflate ignores the padding bits after a stream's end, which the raw CRC
    // therefore cannot see.
    store_le<uint32_t>(crcs.data() + uint64_t{b} * 8 + 4, proto::crc32c(stored));
    // Scatter into the arrays.
    uint64_t pos = offset;
    size_t done = 0;
    while (done < raw_len) {
      const uint64_t array_bytes = m.elems * 4;
      const auto a = static_cast<size_t>(pos / array_bytes);
      const uint64_t within = pos % array_bytes;
      const auto n = static_cast<size_t>(std::min<uint64_t>(array_bytes - within, raw_len - done));
      cp.arrays[a].resize(static_cast<size_t>((within + n + 3) / 4));
      std::memcpy(reinterpret_cast<std::byte*>(cp.arrays[a].data()) + within, out.data() + done, n);
      done += n;
      pos += n;
    }
    offset += raw_len;
    at += stored_len;
  }
  if (f.size() - at != format::kTrailerBytes) return bad("torn: the trailer is missing or the file runs on");
  if (std::memcmp(f.data() + at, format::kTrailerMagic.data(), format::kTrailerMagic.size()) != 0 ||
      load_le<uint32_t>(f.data() + at + 8) != blocks || load_le<uint32_t>(f.data() + at + 12) != proto::crc32c(crcs)) {
    return bad("trailer mismatch");
  }
  // Last, the MAC of everything before it: a file altered or planted by someone without the job's secret,
  // or written under another secret, is refused here. (Before this point nothing is trusted beyond the
  // header's bounds, which the expectation checked.)
  const size_t covered = f.size() - format::kMacBytes;
  if (!file_mac_matches(key, f.first(covered), f.subspan(covered).first<format::kMacBytes>())) {
    return bad("MAC mismatch: altered, planted, or written under another secret (docs/persistence.md)");
  }
  return cp;
}

Expected<Checkpoint, std::string> read_checkpoint(const std::filesystem::path& file, const CheckpointKey& key,
                                                  const Expectation* expect) {
  // No link is followed, and a FIFO planted in the directory does not block the open (fstat refuses it).
  int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return bad(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad("not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return bad("empty (torn)");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return bad(std::string("cannot map: ") + std::strerror(errno));
  auto cp = parse_checkpoint(Bytes(static_cast<const std::byte*>(map), size), key, expect);
  ::munmap(map, size);
  return cp;
}

}  // namespace phub::persist

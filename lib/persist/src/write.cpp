// write_checkpoint: header, compressed blocks, trailer and MAC into a temporary file streamed to the disk,
// fsync, rename, fsync of the directory. The arrays are read block by block through one staging buffer:
// no copy of the state.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "codec.hpp"
#include "format.hpp"
#include "mac.hpp"
#include "phub/base/bytes.hpp"
#include "phub/persist/checkpoint.hpp"
#include "phub/proto/auth.hpp"

namespace phub::persist {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints store fp32 arrays as little-endian bytes");

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// While a call that may block for long runs (an fsync committing a large file's metadata), a helper thread
// calls `beat` every 100 ms in the caller's place, for at most kMaxBeatWhileBlocked: a disk that hangs for
// longer still starves the watchdog, as it should. Only the helper calls `beat` meanwhile (the caller is
// blocked), and it is joined before the caller goes on.
class BeatWhileBlocked {
 public:
  explicit BeatWhileBlocked(const std::function<void()>& beat) {
    if (beat) thread_ = std::thread([this, &beat] { run(beat); });
  }
  ~BeatWhileBlocked() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  BeatWhileBlocked(const BeatWhileBlocked&) = delete;
  BeatWhileBlocked& operator=(const BeatWhileBlocked&) = delete;

 private:
  static constexpr auto kPeriod = std::chrono::milliseconds(100);
  static constexpr auto kMaxBeatWhileBlocked = std::chrono::seconds(30);
  void run(const std::function<void()>& beat) {
    const auto until = std::chrono::steady_clock::now() + kMaxBeatWhileBlocked;
    std::unique_lock<std::mutex> g(mu_);
    while (!cv_.wait_for(g, kPeriod, [this] { return done_; }) && std::chrono::steady_clock::now() < until) beat();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The temporary file, which MACs every byte written to it.
class File {
 public:
  File(int fd, const CheckpointKey& key, const std::function<void()>& beat) : fd_(fd), mac_(key), beat_(beat) {}
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] bool write_all(std::span<const std::byte> bytes) {
    mac_.update(bytes);
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes = bytes.subspan(static_cast<size_t>(n));
      written_ += static_cast<uint64_t>(n);
    }
    write_back();
    return true;
  }
  // Ends the file with the MAC of everything written before it.
  [[nodiscard]] bool write_mac() {
    const auto tag = mac_.finish();
    return write_all(tag);
  }
  [[nodiscard]] bool sync_and_close() {
    // What write_back has not waited for yet, window by window (with the beat between), then the fsync
    // that makes it durable: by then it has little left to flush.
    for (uint64_t at = started_ >= kWindowBytes ? started_ - kWindowBytes : 0; at < written_; at += kWindowBytes) {
      (void)::sync_file_range(fd_, static_cast<off_t>(at), std::min(kWindowBytes, written_ - at),
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      if (beat_) beat_();
    }
    BeatWhileBlocked beating(beat_);
    bool ok = ::fsync(fd_) == 0;
    ok = ::close(fd_) == 0 && ok;
    fd_ = -1;
    return ok;
  }

 private:
  // Streams the file to the disk as it is written, one window behind: each full window is sent to the disk,
  // and the one before it waited for. So no fsync at the end has gigabytes to flush at once (the caller's
  // watchdog would go hungry), and the dirty pages stay within two windows. (Advice only: an error shows
  // in the final fsync.)
  void write_back() {
    while (written_ - started_ >= kWindowBytes) {
      (void)::sync_file_range(fd_, static_cast<off_t>(started_), kWindowBytes, SYNC_FILE_RANGE_WRITE);
      if (started_ >= kWindowBytes) {
        (void)::sync_file_range(fd_, static_cast<off_t>(started_ - kWindowBytes), kWindowBytes,
                                SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        if (beat_) beat_();
      }
      started_ += kWindowBytes;
    }
  }
  static constexpr uint64_t kWindowBytes = uint64_t{8} << 20;
  int fd_;
  FileMac mac_;
  const std::function<void()>& beat_;
  uint64_t written_ = 0;
  uint64_t started_ = 0;  // bytes before this were sent to the disk
};

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > format::kMaxNameBytes) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::byte> header_bytes(const CheckpointMeta& m, uint32_t arrays, uint32_t blocks) {
  const auto& name = m.id.job;
  std::vector<std::byte> h(format::kFixedHeaderBytes + name.size() + 4);
  std::memcpy(h.data(), format::kMagic.data(), format::kMagic.size());
  store_le<uint32_t>(h.data() + 8, format::kVersion);
  store_le<uint32_t>(h.data() + 12, static_cast<uint32_t>(h.size()));
  store_le<uint16_t>(h.data() + 16, m.id.job_id);
  store_le<uint16_t>(h.data() + 18, m.id.shard_index);
  store_le<uint16_t>(h.data() + 20, m.epoch);
  store_le<uint16_t>(h.data() + 22, static_cast<uint16_t>(name.size()));
  store_le<uint64_t>(h.data() + 24, m.id.config_fingerprint);
  store_le<uint32_t>(h.data() + 32, m.round);
  store_le<uint32_t>(h.data() + 36, arrays);
  store_le<uint64_t>(h.data() + 40, m.elems);
  store_le<uint32_t>(h.data() + 48, format::kBlockRawBytes);
  store_le<uint32_t>(h.data() + 52, blocks);
  store_le<uint64_t>(h.data() + 56, m.step);
  std::memcpy(h.data() + format::kFixedHeaderBytes, name.data(), name.size());
  const size_t covered = h.size() - 4;
  store_le<uint32_t>(h.data() + covered, proto::crc32c(std::span<const std::byte>(h.data(), covered)));
  return h;
}

// Copies raw bytes [offset, offset + out.size()) of the arrays' concatenation into out.
void gather(std::span<const std::span<const float>> arrays, uint64_t offset, std::span<std::byte> out) {
  size_t done = 0;
  for (const auto& a : arrays) {
    const uint64_t bytes = a.size_bytes();
    if (offset >= bytes) {
      offset -= bytes;
      continue;
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - offset, out.size() - done));
    std::memcpy(out.data() + done, reinterpret_cast<const std::byte*>(a.data()) + offset, n);
    done += n;
    offset = 0;
    if (done == out.size()) return;
  }
}

}  // namespace

Expected<std::filesystem::path, std::string> write_checkpoint(const std::filesystem::path& dir,
                                                              const CheckpointMeta& meta,
                                                              std::span<const std::span<const float>> arrays,
                                                              const CheckpointKey& key,
                                                              const std::function<void()>& each_block) {
  if (!valid_name(meta.id.job)) return unexpected("checkpoint: job name '" + meta.id.job.substr(0, 64) +
                                                  "' is not 1..64 bytes of [A-Za-z0-9_.-]");
  if (arrays.empty() || arrays.size() > format::kMaxArrays) {
    return unexpected("checkpoint: " + std::to_string(arrays.size()) + " arrays, not 1.." +
                      std::to_string(format::kMaxArrays));
  }
  for (const auto& a : arrays) {
    if (a.size() != meta.elems) return unexpected("checkpoint: an array of " + std::to_string(a.size()) +
                                                  " elements, the meta says " + std::to_string(meta.elems));
  }
  const uint64_t raw_total = meta.elems * 4 * arrays.size();
  if (meta.elems > format::kMaxRawBytes || raw_total > format::kMaxRawBytes) {
    return unexpected("checkpoint: " + std::to_string(raw_total) + " bytes of state is above the format's limit");
  }
  const uint64_t blocks = (raw_total + format::kBlockRawBytes - 1) / format::kBlockRawBytes;

  const auto final_path = dir / checkpoint_file_name(meta.id, meta.round);
  const auto temp_path = std::filesystem::path(final_path.string() + ".tmp");
  if (auto trusted = check_directory(dir); !trusted) return unexpected(trusted.error());
  // A stale temporary file of a write that crashed goes first (unlink removes a link, never its target).
  // The new one is created, never opened: a name planted meanwhile, a link above all, fails the write.
  if (::unlink(temp_path.c_str()) != 0 && errno != ENOENT) {
    return unexpected(errno_text("checkpoint: cannot remove the stale " + temp_path.string()));
  }
  int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return unexpected(errno_text("checkpoint: cannot create " + temp_path.string()));
  File file(fd, key, each_block);
  auto fail = [&](const std::string& what) {
    std::string e = errno_text("checkpoint: " + what + " " + temp_path.string());
    ::unlink(temp_path.c_str());
    return unexpected(std::move(e));
  };

  if (!file.write_all(header_bytes(meta, static_cast<uint32_t>(arrays.size()), static_cast<uint32_t>(blocks)))) {
    return fail("cannot write");
  }
  BlockCompressor compressor;
  std::vector<std::byte> raw(format::kBlockRawBytes);
  std::vector<std::byte> packed;
  std::vector<std::byte> crcs;
  crcs.reserve(blocks * 8);
  std::array<std::byte, format::kBlockHeaderBytes> bh{};
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t offset = b * format::kBlockRawBytes;
    const auto len = static_cast<size_t>(std::min<uint64_t>(format::kBlockRawBytes, raw_total - offset));
    std::span<std::byte> block(raw.data(), len);
    gather(arrays, offset, block);
    const uint32_t crc = proto::crc32c(block);
    const bool deflated = compressor.compress(block, packed);
    std::span<const std::byte> stored = deflated ? std::span<const std::byte>(packed) : block;
    store_le<uint32_t>(bh.data(), static_cast<uint32_t>(len));
    store_le<uint32_t>(bh.data() + 4, static_cast<uint32_t>(stored.size()));
    store_le<uint32_t>(bh.data() + 8, deflated ? format::kKindDeflate : format::kKindStored);
    store_le<uint32_t>(bh.data() + 12, crc);
    if (!file.write_all(bh) || !file.write_all(stored)) return fail("cannot write");
    crcs.resize(crcs.size() + 8);
    store_le<uint32_t>(crcs.data() + crcs.size() - 8, crc);
    store_le<uint32_t>(crcs.data() + crcs.size() - 4, proto::crc32c(stored));
    if (each_block) each_block();
  }
  std::array<std::byte, format::kTrailerBytes - format::kMacBytes> trailer{};
  std::memcpy(trailer.data(), format::kTrailerMagic.data(), format::kTrailerMagic.size());
  store_le<uint32_t>(trailer.data() + 8, static_cast<uint32_t>(blocks));
  store_le<uint32_t>(trailer.data() + 12, proto::crc32c(crcs));
  if (!file.write_all(trailer) || !file.write_mac()) return fail("cannot write");
  if (!file.sync_and_close()) return fail("cannot fsync");
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) return fail("cannot rename");
  if (each_block) each_block();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    bool synced = false;
    {
      BeatWhileBlocked beating(each_block);
      synced = ::fsync(dfd) == 0;
    }
    ::close(dfd);
    if (!synced) return unexpected(errno_text("checkpoint: cannot fsync the directory " + dir.string()));
  }
  return final_path;
}

Expected<void, std::string> check_directory(const std::filesystem::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return unexpected(errno_text("checkpoint directory " + dir.string()));
  if (!S_ISDIR(st.st_mode)) return unexpected("checkpoint directory " + dir.string() + " is not a directory");
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return unexpected("checkpoint directory " + dir.string() + " belongs to uid " + std::to_string(st.st_uid) +
                      ", not to the server's user (" + std::to_string(::geteuid()) + ") or root: chown it");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return unexpected("checkpoint directory " + dir.string() + " (mode " + mode +
                      ") is writable by others, who could plant a checkpoint or a link: chmod go-w it");
  }
  return {};
}

}  // namespace phub::persist

// Parameter-server checkpoints: one file per job shard and round, written atomically (a temporary file,
// fsync, rename, fsync of the directory), its arrays compressed with ISA-L's igzip in blocks that each
// carry a CRC32C of their uncompressed bytes, under a header that names the job, its config fingerprint
// and the round, and a MAC of the whole file under a key derived from the job's secret. Reading checks
// everything and says what is wrong; restore_newest() takes the newest file that passes, and names every
// file it skipped and why. DPDK-free (docs/persistence.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/proto/auth.hpp"

namespace phub::persist {

// What a checkpoint is of. A restore takes only files whose job name, job id, shard and fingerprint
// all match the running config's.
struct CheckpointId {
  std::string job;                  // the job's name (1..64 bytes of [A-Za-z0-9_.-])
  uint16_t job_id = 0;
  uint16_t shard_index = 0;         // this server's shard of the job (0 when not sharded)
  uint64_t config_fingerprint = 0;  // of what the state depends on: keys, dtype, mode, optimizer, ...
  bool operator==(const CheckpointId&) const = default;
};

struct CheckpointMeta {
  CheckpointId id;
  uint32_t round = 0;    // the round boundary the state belongs to (the state after this round)
  uint16_t epoch = 0;    // the job epoch it was taken in
  uint64_t elems = 0;    // elements per array
  uint64_t step = 0;     // optimizer updates applied to the state (momentum's first step, Adam's bias correction)
};

// The state: arrays of `elems` fp32 values each (weights, then the optimizer's state in its order).
struct Checkpoint {
  CheckpointMeta meta;
  std::vector<std::vector<float>> arrays;
};

// The key of a job's checkpoint MACs (SipHash-2-4 of the whole file): 128 bits from libsodium's KDF of the
// job's secret, under its own context, the job id as the subkey number. A job without a secret has the
// all-zero key: its files are checked against corruption, not against someone who writes a file (the
// directory check is that defence). A file written under another secret (or none) is refused, as an
// altered one is.
using CheckpointKey = proto::AuthKey;
[[nodiscard]] CheckpointKey checkpoint_key(std::string_view secret, uint32_t job_id);

// A file's name in its directory: "<job>.s<shard>.r<round, 10 digits>.phubckpt".
[[nodiscard]] std::string checkpoint_file_name(const CheckpointId& id, uint32_t round);

// A directory the server may keep checkpoints in: a directory owned by the server's user (or root) that
// nobody else can write to. Anyone who could write there could plant a file for the next restore, or a
// name for the next write. The error names what is wrong and how to fix it.
[[nodiscard]] Expected<void, std::string> check_directory(const std::filesystem::path& dir);

// Writes the checkpoint into `dir` (which must exist and pass check_directory) atomically; returns the final path. On any error
// the temporary file is removed and nothing else changed.
// `each_block`, when given, is called after every 1 MiB block and every wait for the disk: a long write
// keeps a watchdog fed with it.
[[nodiscard]] Expected<std::filesystem::path, std::string> write_checkpoint(
    const std::filesystem::path& dir, const CheckpointMeta& meta, std::span<const std::span<const float>> arrays,
    const CheckpointKey& key, const std::function<void()>& each_block = {});

// Reads and checks one file: magic, version, header CRC, every block's length and CRC, the totals, and last
// the MAC of the whole file under `key`.
// Never trusts a length before checking it against the file and the limits. A symbolic link, a FIFO or
// anything else that is not a regular file is refused without blocking.
// What a restore expects of a file: its job, shard and config, and (when known) the state's shape. A file
// whose header says otherwise is refused before one block is inflated, so that a file planted with a huge
// declared size (a deflate bomb) costs no more than its header.
struct Expectation {
  CheckpointId id;
  uint32_t arrays = 0;  // 0: any
  uint64_t elems = 0;   // 0: any
};

[[nodiscard]] Expected<Checkpoint, std::string> read_checkpoint(const std::filesystem::path& file, const CheckpointKey& key,
                                                                const Expectation* expect = nullptr);

// Parses a checkpoint held in memory (the fuzz target's entry; read_checkpoint uses it).
[[nodiscard]] Expected<Checkpoint, std::string> parse_checkpoint(std::span<const std::byte> bytes, const CheckpointKey& key,
                                                                 const Expectation* expect = nullptr);

struct Restored {
  std::optional<Checkpoint> checkpoint;  // the newest valid one for the id, if any
  std::filesystem::path file;
  std::vector<std::string> skipped;      // "<file>: <reason>", newest first, one per file skipped
};

// The newest valid checkpoint of `id` in `dir`, falling back past torn or corrupt files. Temporary files
// (a write that never reached its rename) are skipped and named too.
[[nodiscard]] Restored restore_newest(const std::filesystem::path& dir, const Expectation& expect,
                                      const CheckpointKey& key);

// A fresh-weights run of the job started: its earlier run's files are set aside, renamed to
// "<name>.superseded" (the set aside before is removed first), so that no restore ever takes them and an
// operator can still rename one back on purpose. Returns how many files were set aside.
size_t supersede_checkpoints(const std::filesystem::path& dir, const CheckpointId& id);

// Keeps the newest `keep` valid-looking files of `id` (by name) and removes older ones and stale
// temporary files. Returns how many files were removed.
size_t prune_checkpoints(const std::filesystem::path& dir, const CheckpointId& id, size_t keep);

}  // namespace phub::persist

// lib/persist: checkpoints round-trip bit for bit; torn, corrupt, foreign and unrenamed files are skipped
// with a reason, and the restore falls back to the newest file that is whole.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include "phub/persist/checkpoint.hpp"

namespace phub::persist {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "phub-ckpt-XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

CheckpointId job_id() { return CheckpointId{"resnet-ps", 7, 1, 0x1234abcd5678ef00ull}; }
const CheckpointKey kKey = checkpoint_key("the test job's secret, 24+ bytes", 7);

// Weights and Adam moments: random floats (incompressible) or a pattern igzip shrinks.
std::vector<std::vector<float>> state(uint64_t elems, uint32_t seed, bool compressible) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::vector<float>> a(3, std::vector<float>(elems));
  for (size_t k = 0; k < a.size(); ++k) {
    for (uint64_t i = 0; i < elems; ++i) a[k][i] = compressible ? static_cast<float>((i % 7) * (k + 1)) : n(rng);
  }
  return a;
}

fs::path write(const fs::path& dir, uint32_t round, const std::vector<std::vector<float>>& a,
               const CheckpointId& id = job_id(), const CheckpointKey& key = kKey) {
  CheckpointMeta m{id, round, 3, a[0].size(), 5'000'000'000ull + round};
  std::vector<std::span<const float>> spans(a.begin(), a.end());
  auto p = write_checkpoint(dir, m, spans, key);
  EXPECT_TRUE(p.has_value()) << p.error();
  return p.has_value() ? *p : fs::path();
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].size() != b[k].size() || std::memcmp(a[k].data(), b[k].data(), a[k].size() * 4) != 0) return false;
  }
  return true;
}

std::vector<char> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& p, const std::vector<char>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

TEST(Checkpoint, RoundTripsBitForBit) {
  TempDir d;
  // 700001 elements x 3 arrays: 8.4 MB in 9 blocks, the last one partial, arrays crossing blocks.
  for (bool compressible : {false, true}) {
    auto a = state(700001, 11, compressible);
    auto p = write(d.path(), 42, a);
    EXPECT_EQ(p.filename(), "resnet-ps.s1.r0000000042.phubckpt");
    auto cp = read_checkpoint(p, kKey);
    ASSERT_TRUE(cp.has_value()) << cp.error();
    EXPECT_EQ(cp->meta.id, job_id());
    EXPECT_EQ(cp->meta.round, 42u);
    EXPECT_EQ(cp->meta.epoch, 3u);
    EXPECT_EQ(cp->meta.step, 5'000'000'042ull);
    EXPECT_TRUE(same_bits(cp->arrays, a));
    const auto raw = 700001ull * 4 * 3;
    if (compressible) EXPECT_LT(fs::file_size(p), raw / 10) << "igzip should shrink a repeating pattern";
    else EXPECT_LT(fs::file_size(p), raw + raw / 100) << "stored blocks add only their headers";
  }
  EXPECT_FALSE(fs::exists(d.path() / "resnet-ps.s1.r0000000042.phubckpt.tmp"));
}

TEST(Checkpoint, NewestValidIsRestored) {
  TempDir d;
  write(d.path(), 10, state(5000, 1, false));
  auto newest = state(5000, 2, false);
  write(d.path(), 20, newest);
  write(d.path(), 9, state(5000, 3, false), CheckpointId{"other", 8, 0, 1});
  auto r = restore_newest(d.path(), {job_id()}, kKey);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->meta.round, 20u);
  EXPECT_TRUE(same_bits(r.checkpoint->arrays, newest));
  EXPECT_TRUE(r.skipped.empty());
}

// Each kind of damage to the newest file: it is skipped with one line naming it and why, and the restore
// falls back to the round before, whole.
TEST(Checkpoint, TornOrCorruptFilesAreSkippedWithAReason) {
  struct Damage {
    const char* what;
    std::function<void(std::vector<char>&)> apply;
    const char* reason;
  };
  const std::vector<Damage> damages = {
      {"truncated in a block", [](std::vector<char>& b) { b.erase(b.begin() + static_cast<std::ptrdiff_t>(b.size() / 2), b.end()); }, "torn"},
      {"truncated in the header", [](std::vector<char>& b) { b.erase(b.begin() + 30, b.end()); }, "shorter than a header"},
      {"trailer cut", [](std::vector<char>& b) { b.erase(b.end() - 3, b.end()); }, "trailer"},
      {"empty", [](std::vector<char>& b) { b.clear(); }, "empty"},
      {"flipped byte in the payload", [](std::vector<char>& b) { b[b.size() / 2] ^= 0x10; }, "block"},
      {"flipped byte in the header", [](std::vector<char>& b) { b[33] ^= 0x01; }, "header CRC32C mismatch"},
      {"flipped byte in the magic", [](std::vector<char>& b) { b[0] ^= 0x01; }, "magic"},
      {"junk appended", [](std::vector<char>& b) { b.push_back('x'); }, "runs on"},
  };
  for (const auto& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    TempDir d;
    auto older = state(300000, 5, false);
    write(d.path(), 100, older);
    auto p = write(d.path(), 200, state(300000, 6, false));
    auto b = bytes_of(p);
    dmg.apply(b);
    put(p, b);
    auto r = restore_newest(d.path(), {job_id()}, kKey);
    ASSERT_TRUE(r.checkpoint.has_value());
    EXPECT_EQ(r.checkpoint->meta.round, 100u);
    EXPECT_TRUE(same_bits(r.checkpoint->arrays, older));
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_EQ(r.skipped[0].rfind("resnet-ps.s1.r0000000200.phubckpt: ", 0), 0u) << r.skipped[0];
    EXPECT_NE(r.skipped[0].find(dmg.reason), std::string::npos) << r.skipped[0];
  }
}

TEST(Checkpoint, AMissingRenameIsSkipped) {
  TempDir d;
  auto older = state(4000, 8, true);
  write(d.path(), 5, older);
  auto p = write(d.path(), 6, state(4000, 9, true));
  fs::rename(p, fs::path(p.string() + ".tmp"));  // as if the server died between fsync and rename
  auto r = restore_newest(d.path(), {job_id()}, kKey);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->meta.round, 5u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("never reached its rename"), std::string::npos) << r.skipped[0];
}

// A link planted at the next write's temporary name is removed, never followed: its target is unchanged.
TEST(Checkpoint, ALinkAtTheTemporaryNameIsNeverFollowed) {
  TempDir d;
  TempDir elsewhere;
  const fs::path target = elsewhere.path() / "precious";
  put(target, {'k', 'e', 'e', 'p'});
  const fs::path temp = d.path() / (checkpoint_file_name(job_id(), 4) + ".tmp");
  fs::create_symlink(target, temp);
  const auto a = state(2000, 3, true);
  const fs::path p = write(d.path(), 4, a);
  EXPECT_EQ(bytes_of(target), (std::vector<char>{'k', 'e', 'e', 'p'}));
  EXPECT_FALSE(fs::exists(fs::symlink_status(temp)));
  auto back = read_checkpoint(p, kKey);
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_TRUE(same_bits(back->arrays, a));
}

// A FIFO or a link under a checkpoint's name is skipped without blocking, with its reason: a link's target
// (here a whole checkpoint of the job, written elsewhere) is never read.
TEST(Checkpoint, AFifoOrALinkInTheDirectoryIsSkippedWithoutBlocking) {
  TempDir d;
  TempDir elsewhere;
  write(d.path(), 5, state(1000, 1, true));
  const fs::path planted = write(elsewhere.path(), 9, state(1000, 2, true));
  fs::create_symlink(planted, d.path() / checkpoint_file_name(job_id(), 9));
  ASSERT_EQ(::mkfifo((d.path() / checkpoint_file_name(job_id(), 8)).c_str(), 0600), 0);
  auto r = restore_newest(d.path(), {job_id()}, kKey);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->meta.round, 5u);
  ASSERT_EQ(r.skipped.size(), 2u);
  EXPECT_NE(r.skipped[0].find("symbolic links"), std::string::npos) << r.skipped[0];
  EXPECT_NE(r.skipped[1].find("not a regular file"), std::string::npos) << r.skipped[1];
}

// A directory that others can write to, or that belongs to another user, is refused with the fix; so is
// every write into it.
TEST(Checkpoint, ADirectoryOthersCanWriteIsRefused) {
  TempDir d;
  EXPECT_TRUE(check_directory(d.path()).has_value());
  for (const fs::perms p : {fs::perms::owner_all | fs::perms::group_write, fs::perms::all}) {
    fs::permissions(d.path(), p);
    auto e = check_directory(d.path());
    ASSERT_FALSE(e.has_value());
    EXPECT_NE(e.error().find("writable by others"), std::string::npos) << e.error();
    EXPECT_NE(e.error().find("chmod go-w"), std::string::npos) << e.error();
    CheckpointMeta m{job_id(), 1, 3, 10, 1};
    const std::vector<float> a(10);
    const std::vector<std::span<const float>> spans(3, std::span<const float>(a));
    EXPECT_FALSE(write_checkpoint(d.path(), m, spans, kKey).has_value());
  }
  fs::permissions(d.path(), fs::perms::owner_all);
  if (::geteuid() == 0) {  // only root can give a directory away
    ASSERT_EQ(::chown(d.path().c_str(), 4242, 4242), 0);
    auto e = check_directory(d.path());
    ASSERT_FALSE(e.has_value());
    EXPECT_NE(e.error().find("belongs to uid 4242"), std::string::npos) << e.error();
    ASSERT_EQ(::chown(d.path().c_str(), 0, 0), 0);
  }
  EXPECT_NE(check_directory(d.path() / "absent").error().find("No such file"), std::string::npos);
  put(d.path() / "file", {'x'});
  EXPECT_NE(check_directory(d.path() / "file").error().find("is not a directory"), std::string::npos);
}

TEST(Checkpoint, AnotherConfigsCheckpointIsNotRestored) {
  TempDir d;
  auto id = job_id();
  write(d.path(), 3, state(1000, 1, false), id);
  id.config_fingerprint ^= 1;  // the job's keys or optimizer changed since
  auto r = restore_newest(d.path(), {id}, kKey);
  EXPECT_FALSE(r.checkpoint.has_value());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("fingerprint"), std::string::npos) << r.skipped[0];
}

// A file of another shape is refused by its header before a block is inflated: its body here is damaged,
// and the reason is the shape, not the damage (a planted file declaring a huge state costs its header only).
TEST(Checkpoint, AnotherShapeIsRefusedBeforeInflating) {
  TempDir d;
  const fs::path p = write(d.path(), 3, state(50'000, 1, true));
  auto b = bytes_of(p);
  b[b.size() / 2] ^= 0x5a;  // inside the blocks
  put(p, b);
  auto r = restore_newest(d.path(), {job_id(), 3, 20'000}, kKey);
  EXPECT_FALSE(r.checkpoint.has_value());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("3 arrays of 50000 elements, the job has 3 of 20000"), std::string::npos) << r.skipped[0];
  r = restore_newest(d.path(), {job_id(), 3, 50'000}, kKey);  // the right shape: now the damage is found
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("block"), std::string::npos) << r.skipped[0];
}

TEST(Checkpoint, NothingToRestoreInAnEmptyOrMissingDirectory) {
  TempDir d;
  EXPECT_FALSE(restore_newest(d.path(), {job_id()}, kKey).checkpoint.has_value());
  EXPECT_FALSE(restore_newest(d.path() / "absent", {job_id()}, kKey).checkpoint.has_value());
}

TEST(Checkpoint, PruneKeepsTheNewest) {
  TempDir d;
  for (uint32_t r : {1u, 2u, 3u, 4u}) write(d.path(), r, state(100, r, true));
  put(d.path() / "resnet-ps.s1.r0000000009.phubckpt.tmp", {'x'});
  EXPECT_EQ(prune_checkpoints(d.path(), job_id(), 2), 3u);  // rounds 1 and 2, and the temporary file
  auto r = restore_newest(d.path(), {job_id()}, kKey);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->meta.round, 4u);
  EXPECT_TRUE(fs::exists(d.path() / "resnet-ps.s1.r0000000003.phubckpt"));
  EXPECT_FALSE(fs::exists(d.path() / "resnet-ps.s1.r0000000002.phubckpt"));
}

TEST(Checkpoint, BadArgumentsAreRefused) {
  TempDir d;
  std::vector<float> a(10), b(11);
  std::vector<std::span<const float>> spans{a, b};
  CheckpointMeta m{job_id(), 1, 0, 10};
  auto e = write_checkpoint(d.path(), m, spans, kKey);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("11 elements"), std::string::npos) << e.error();
  m.id.job = "../escape";
  std::vector<std::span<const float>> one{a};
  e = write_checkpoint(d.path(), m, one, kKey);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("[A-Za-z0-9_.-]"), std::string::npos) << e.error();
  m.id.job = "ok";
  e = write_checkpoint(d.path() / "absent", m, one, kKey);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("absent: No such file or directory"), std::string::npos) << e.error();
}

// Every single-byte corruption of a small file is either refused or (never) accepted with other values:
// a CRC32C per block and over the header catches each one.
TEST(Checkpoint, EverySingleByteFlipIsCaught) {
  TempDir d;
  auto p = write(d.path(), 1, state(2000, 4, false));
  const auto good = bytes_of(p);
  for (size_t i = 0; i < good.size(); i += 7) {
    auto b = good;
    b[i] ^= 0x20;
    auto cp = parse_checkpoint(std::span(reinterpret_cast<const std::byte*>(b.data()), b.size()), kKey);
    EXPECT_FALSE(cp.has_value()) << "a flip at byte " << i << " was accepted";
  }
}

// A file planted by someone without the job's secret: whole, its CRCs right, written by the same code under
// another key (another secret, or none). The MAC refuses it, and the restore falls back to the real one.
TEST(Checkpoint, APlantedFileOrOneOfAnotherSecretIsRefused) {
  TempDir d;
  auto real = state(3000, 1, false);
  write(d.path(), 5, real);
  write(d.path(), 9, state(3000, 2, false), job_id(), checkpoint_key("an attacker's guess at the secret", 7));
  auto r = restore_newest(d.path(), {job_id(), 3, 3000}, kKey);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->meta.round, 5u);
  EXPECT_TRUE(same_bits(r.checkpoint->arrays, real));
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("r0000000009.phubckpt: MAC mismatch"), std::string::npos) << r.skipped[0];
  // A job without a secret has the all-zero key: a keyed file is not its, and its own files are not a keyed job's.
  const CheckpointKey open = checkpoint_key("", 7);
  EXPECT_EQ(open, CheckpointKey{});
  EXPECT_FALSE(read_checkpoint(d.path() / "resnet-ps.s1.r0000000005.phubckpt", open).has_value());
  const fs::path o = write(d.path(), 11, real, job_id(), open);
  EXPECT_TRUE(read_checkpoint(o, open).has_value());
  EXPECT_FALSE(read_checkpoint(o, kKey).has_value());
  // The key is per job: the same secret gives job 8 another key.
  EXPECT_NE(checkpoint_key("the test job's secret, 24+ bytes", 8), kKey);
}

// A run with fresh weights sets the earlier run's files aside: no restore takes them, even when the new
// run has written none yet, and the set aside before goes when the next fresh run starts.
TEST(Checkpoint, AFreshRunSetsTheEarlierRunAside) {
  TempDir d;
  for (uint32_t r : {100u, 200u}) write(d.path(), r, state(500, r, true));
  write(d.path(), 300, state(500, 3, true), CheckpointId{"other-job", 8, 0, 1});
  EXPECT_EQ(supersede_checkpoints(d.path(), job_id()), 2u);
  EXPECT_FALSE(restore_newest(d.path(), {job_id()}, kKey).checkpoint.has_value());
  EXPECT_TRUE(fs::exists(d.path() / "resnet-ps.s1.r0000000200.phubckpt.superseded"));
  EXPECT_TRUE(fs::exists(d.path() / "other-job.s0.r0000000300.phubckpt"));  // another job's are untouched
  write(d.path(), 4, state(500, 4, true));  // the new run's first checkpoint
  auto r = restore_newest(d.path(), {job_id()}, kKey);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->meta.round, 4u);
  EXPECT_EQ(supersede_checkpoints(d.path(), job_id()), 1u);  // a third run: round 4 aside, 100 and 200 gone
  EXPECT_TRUE(fs::exists(d.path() / "resnet-ps.s1.r0000000004.phubckpt.superseded"));
  EXPECT_FALSE(fs::exists(d.path() / "resnet-ps.s1.r0000000200.phubckpt.superseded"));
  // An operator who wants the old state back renames it: it is whole and restores.
  fs::rename(d.path() / "resnet-ps.s1.r0000000004.phubckpt.superseded", d.path() / "resnet-ps.s1.r0000000004.phubckpt");
  EXPECT_TRUE(restore_newest(d.path(), {job_id()}, kKey).checkpoint.has_value());
}

}  // namespace
}  // namespace phub::persist

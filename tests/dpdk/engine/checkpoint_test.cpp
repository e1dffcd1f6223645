// Parameter-server checkpoints on the real engine: a ps job with Adam is checkpointed at a round
// boundary (some chunks copied at once, the others as they complete the round), a fresh engine restores
// the file and continues bit for bit like the engine that never stopped; and what phub-ctl checkpoint
// answers for jobs that cannot have one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "harness.hpp"

namespace phub::test {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "phub-ckpt-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

constexpr uint16_t kLcores = 2;
constexpr uint16_t kWorkers = 2;

config::Job adam_job(const fs::path& dir) {
  auto job = make_job(1, kWorkers, {3000, 700});
  job.name = "adam";
  job.mode = config::JobMode::ps;
  job.reduce = config::Reduce::mean;
  job.chunk_bytes = 4096;  // 1024 elements: 4 chunks, over both lcores
  job.optimizer.kind = config::OptimizerKind::adam;
  job.optimizer.lr = 0.01f;
  job.optimizer.weight_decay = 0.001f;
  job.checkpoint.dir = dir.string();
  job.checkpoint.keep = 2;
  return job;
}

// One engine on its own ring link with emulated workers.
struct PsServer : StartedEngine {
  uint16_t epoch = 0;

  explicit PsServer(std::vector<config::Job> jobs) : StartedEngine(kLcores, std::move(jobs)) {}
  const proto::Layout& layout() { return StartedEngine::layout(0); }

  proto::Header header(proto::Opcode op, uint32_t chunk, uint32_t seg, uint32_t round, uint16_t rank) {
    const auto& l = layout();
    proto::Header h;
    h.opcode = op;
    h.rank = rank;
    h.round = round;
    h.epoch = epoch;
    h.chunk_id = chunk;
    h.elem_offset = l.segment_offset(seg);
    h.elem_count = static_cast<uint16_t>(l.segment_count_elems(l.chunk(chunk), seg));
    return h;
  }
  size_t segments() {
    size_t n = 0;
    for (const auto& ci : layout().chunks()) n += ci.segments;
    return n;
  }
  // Rank 0's initial weights: a pattern of small values.
  void init() {
    const auto& l = layout();
    for (uint32_t c = 0; c < l.chunk_count(); ++c) {
      for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg) {
        proto::Header h = header(proto::Opcode::init, c, seg, 0, 0);
        std::vector<float> v(h.elem_count);
        for (uint32_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((c * 7 + seg * 3 + i) % 11) * 0.125f;
        workers->send(cfg.jobs[0], 0, h, encode(v, Dtype::fp32));
      }
    }
    ASSERT_EQ(workers->receive(segments()).size(), segments());
  }
  // Every rank pushes the chunks in `chunks` (all when empty) for `round`.
  void push(uint32_t round, const std::vector<uint32_t>& chunks = {}) {
    const auto& l = layout();
    for (uint32_t c = 0; c < l.chunk_count(); ++c) {
      if (!chunks.empty() && std::find(chunks.begin(), chunks.end(), c) == chunks.end()) continue;
      for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg) {
        for (uint16_t r = 0; r < kWorkers; ++r) {
          proto::Header h = header(proto::Opcode::push, c, seg, round, r);
          std::vector<float> v(h.elem_count);
          for (uint32_t i = 0; i < v.size(); ++i) v[i] = gradient(r, round, c, h.elem_offset + i);
          workers->send(cfg.jobs[0], r, h, encode(v, Dtype::fp32));
        }
      }
    }
  }
  // The weights after a round, from rank 0's results: (chunk, offset) -> values.
  using Weights = std::map<std::pair<uint32_t, uint32_t>, std::vector<float>>;
  Weights collect(size_t expected_segments) {
    Weights out;
    for (const auto& r : workers->receive(expected_segments * kWorkers)) {
      EXPECT_EQ(r.hdr.opcode, proto::Opcode::result) << proto::status_name(r.hdr.status);
      if (r.hdr.rank == 0) out[{r.hdr.chunk_id, r.hdr.elem_offset}] = decode(r.payload, Dtype::fp32);
    }
    EXPECT_EQ(out.size(), expected_segments);
    return out;
  }
  Weights round(uint32_t r) {
    push(r);
    return collect(segments());
  }
};

bool bit_equal(const PsServer::Weights& a, const PsServer::Weights& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second.size() != v.size() || std::memcmp(v.data(), it->second.data(), v.size() * 4) != 0) {
      return false;
    }
  }
  return true;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Checkpoint, AdamJobRestoredByAFreshEngineContinuesBitForBit) {
  TempDir dir;
  std::vector<PsServer::Weights> uninterrupted;
  uint32_t saved_round = 0;
  {
    PsServer a({adam_job(dir.path())});
    auto refused = a.engine->checkpoint("adam");
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().find("no round completed"), std::string::npos) << refused.error();
    a.init();
    for (uint32_t r = 0; r < 3; ++r) (void)a.round(r);
    // Round 3 half done: chunk 0 completes it (its state is copied at once), the others complete it
    // only after the checkpoint was asked for (each is copied in the iteration that completes it).
    a.push(3, {0});
    const auto chunk0 = a.collect(a.layout().chunk(0).segments);
    Expected<engine::CheckpointWritten, std::string> written = unexpected(std::string("not run"));
    std::thread control([&] { written = a.engine->checkpoint("adam"); });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (a.engine->totals().jobs[0].checkpoint_chunks_copied == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // time to copy more, were any wrongly at the boundary
    EXPECT_EQ(a.engine->totals().jobs[0].checkpoint_chunks_copied, 1u) << "only chunk 0 is at the boundary";
    std::vector<uint32_t> rest;
    for (uint32_t c = 1; c < a.layout().chunk_count(); ++c) rest.push_back(c);
    a.push(3, rest);
    size_t rest_segments = 0;
    for (uint32_t c : rest) rest_segments += a.layout().chunk(c).segments;
    (void)a.collect(rest_segments);
    control.join();
    ASSERT_TRUE(written.has_value()) << written.error();
    saved_round = written->round;
    EXPECT_EQ(saved_round, 3u);
    EXPECT_EQ(written->step, 4u);
    EXPECT_EQ(written->state_bytes, (3000u + 700u) * 4 * 3);
    EXPECT_EQ(written->file.filename(), "adam.s0.r0000000003.phubckpt");
    EXPECT_EQ(a.engine->totals().jobs[0].checkpoint_chunks_copied, a.layout().chunk_count());
    EXPECT_EQ(a.engine->totals().jobs[0].checkpoints_written, 1u);
    for (uint32_t r = 4; r < 7; ++r) uninterrupted.push_back(a.round(r));
  }
  ASSERT_EQ(files_in(dir.path()), std::vector<fs::path>{"adam.s0.r0000000003.phubckpt"});

  PsServer b({adam_job(dir.path())});
  const auto lines = b.engine->restore_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("restored the state after round 3 (epoch 0, step 4)"), std::string::npos) << lines[0];
  // Half the epoch space away from the file's (epoch 0): 0x8001.
  EXPECT_NE(lines[0].find("resumes in epoch 32769 at round 4"), std::string::npos) << lines[0];
  constexpr uint16_t kRestored = 0x8001;
  // The old run's packets (epoch 0) are refused, and so are those of a run that restarted the job after
  // the checkpoint (epoch 1, its rounds counted from 0 again: its round 4 is not the state's round 4);
  // a join learns the epoch and its first round.
  for (uint16_t lost_epoch : {uint16_t{0}, uint16_t{1}}) {
    b.epoch = lost_epoch;
    b.push(4, {0});
    auto old = b.workers->receive(1);
    ASSERT_FALSE(old.empty());
    EXPECT_EQ(old[0].hdr.status, proto::Status::epoch_mismatch) << "epoch " << lost_epoch;
    EXPECT_EQ(old[0].hdr.aux, kRestored);
    (void)b.workers->receive(64, std::chrono::milliseconds(200));  // the other answers to the lost epoch
  }
  proto::Header j;
  j.opcode = proto::Opcode::join;
  j.aux = 0x1234;
  j.epoch = kRestored;
  b.workers->send(b.cfg.jobs[0], 0, j, {});
  auto joined = b.workers->receive(1);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].hdr.opcode, proto::Opcode::joined);
  EXPECT_EQ(joined[0].hdr.epoch, kRestored);
  EXPECT_EQ(joined[0].hdr.round, 4u);
  (void)b.workers->receive(64, std::chrono::milliseconds(100));  // the other lcore's answer
  b.epoch = kRestored;
  for (uint32_t r = 4; r < 7; ++r) {
    const auto got = b.round(r);
    EXPECT_TRUE(bit_equal(got, uninterrupted[r - 4])) << "round " << r << " differs from the uninterrupted run";
  }
}

TEST(Checkpoint, NoBoundaryInTimeFailsAndLeavesTheLcoresFree) {
  TempDir dir;
  PsServer s({adam_job(dir.path())});
  s.init();
  (void)s.round(0);
  s.push(1, {0});  // chunk 0 completes round 1, the others never do (until later)
  (void)s.collect(s.layout().chunk(0).segments);
  auto late = s.engine->checkpoint("adam", std::chrono::milliseconds(200));
  ASSERT_FALSE(late.has_value());
  // Chunk 0 was copied at once; the others never reached the boundary. (The wait is 200 ms plus what copying
  // this state may take: a few ms for 45 KB.)
  EXPECT_NE(late.error().find("copied 1 of 4 chunks in time (round 2 not complete on the others"), std::string::npos)
      << late.error();
  EXPECT_EQ(s.engine->totals().jobs[0].checkpoints_failed, 1u);
  EXPECT_TRUE(files_in(dir.path()).empty());
  // The lcores hold nothing of it: the round completes, and the next checkpoint is whole.
  std::vector<uint32_t> rest;
  size_t rest_segments = 0;
  for (uint32_t c = 1; c < s.layout().chunk_count(); ++c) {
    rest.push_back(c);
    rest_segments += s.layout().chunk(c).segments;
  }
  s.push(1, rest);
  (void)s.collect(rest_segments);
  auto w = s.engine->checkpoint("adam");
  ASSERT_TRUE(w.has_value()) << w.error();
  EXPECT_EQ(w->round, 1u);
  EXPECT_EQ(w->step, 2u);
}

// Finite gradients can still overflow the weights (a learning rate far too large): the checkpoint of such a
// state is refused and counted, and no file is written (earlier clean files would stay the newest).
TEST(Checkpoint, AStateHoldingInfOrNanIsNeverWritten) {
  TempDir dir;
  auto job = adam_job(dir.path());
  job.optimizer.kind = config::OptimizerKind::sgd;
  job.optimizer.weight_decay = 0;
  job.optimizer.lr = 1e38f;  // gradients up to 8: the first step overflows fp32
  PsServer s({job});
  s.init();
  const auto w = s.round(0);
  bool overflowed = false;
  for (const auto& [at, v] : w) {
    for (float x : v) overflowed = overflowed || !std::isfinite(x);
  }
  ASSERT_TRUE(overflowed) << "the step was meant to overflow";
  auto refused = s.engine->checkpoint("adam");
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("holds NaN or Inf"), std::string::npos) << refused.error();
  const auto c = job_counters(*s.engine, 0);
  EXPECT_EQ(c.checkpoints_nonfinite, 1u);
  EXPECT_EQ(c.checkpoints_failed, 1u);
  EXPECT_EQ(c.checkpoints_written, 0u);
  EXPECT_TRUE(files_in(dir.path()).empty());
}

TEST(Checkpoint, OnlyPsJobsWithADirectoryHaveOne) {
  TempDir dir;
  auto allreduce = make_job(2, 2, {100});
  auto no_dir = adam_job(dir.path());
  no_dir.checkpoint = {};
  PsServer s({no_dir, allreduce});
  auto a = s.engine->checkpoint("job2");
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error(), "job 'job2' (id 2) is an allreduce job: only ps jobs keep state to checkpoint");
  auto b = s.engine->checkpoint("adam");
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error(), "job 'adam' (id 1) has no checkpoint directory (set checkpoints.dir or the job's checkpoint.dir)");
  auto c = s.engine->checkpoint("nosuch");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), "no job named 'nosuch'");
}

TEST(Checkpoint, AMissingDirectoryIsAStartError) {
  auto job = adam_job("/nonexistent/phub-ckpt");
  RingLink link{kLcores};
  auto cfg = make_config(link.server_name(), kLcores, {job});
  auto e = engine::Engine::create(cfg);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("jobs[1].checkpoint.dir: checkpoint directory /nonexistent/phub-ckpt: No such file or directory"), std::string::npos)
      << e.error();
}

TEST(Checkpoint, EveryRoundsWritesOnItsOwnAndKeepsTheNewest) {
  TempDir dir;
  auto job = adam_job(dir.path());
  job.checkpoint.every_rounds = 2;
  PsServer s({job});
  s.init();
  std::vector<std::string> logged;
  for (uint32_t r = 0; r < 7; ++r) {
    (void)s.round(r);
    for (auto& line : s.engine->checkpoint_due()) logged.push_back(line);
  }
  // Rounds 0..6 completed, one look after each: due after rounds 1, 3 and 5 (two rounds since the last).
  ASSERT_EQ(logged.size(), 3u);
  EXPECT_NE(logged[0].find("checkpoint of round 1 written"), std::string::npos) << logged[0];
  EXPECT_NE(logged[2].find("checkpoint of round 5 written"), std::string::npos) << logged[2];
  EXPECT_EQ(files_in(dir.path()),
            (std::vector<fs::path>{"adam.s0.r0000000003.phubckpt", "adam.s0.r0000000005.phubckpt"}));
  // A new epoch counts rounds from 0 again: its first checkpoint (round 1) replaces the earlier epoch's
  // files of higher rounds, which a restore would otherwise take for the newest.
  ASSERT_TRUE(s.engine->reset("adam").has_value());
  s.epoch = 1;
  logged.clear();
  for (uint32_t r = 0; r < 2; ++r) {
    (void)s.round(r);
    for (auto& line : s.engine->checkpoint_due()) logged.push_back(line);
  }
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("checkpoint of round 1 written"), std::string::npos) << logged[0];
  EXPECT_EQ(files_in(dir.path()), (std::vector<fs::path>{"adam.s0.r0000000001.phubckpt"}));
}

}  // namespace
}  // namespace phub::test

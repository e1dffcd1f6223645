// Parameter-server checkpoints, the control thread's part: aiming a capture at a round boundary, waiting
// for the lcores to copy their chunks, writing and pruning the files (lib/persist), the every_rounds /
// every_s schedule, and the restore at start-up (docs/persistence.md).
#include <rte_cycles.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "phub/agg/nonfinite.hpp"
#include "phub/engine/checkpoint_id.hpp"
#include "phub/engine/engine.hpp"
#include "lcore.hpp"

namespace phub::engine {
namespace {

constexpr int kCaptureAttempts = 4;
// checkpoint_due() runs on the control loop, which must keep answering (and pinging systemd's watchdog):
// a scheduled checkpoint waits at most this long for a round boundary, and is tried again later.
constexpr auto kScheduledBoundaryWait = std::chrono::seconds(1);
// The capture may take, beyond the wait for a round boundary, the time its copy needs at this rate: the
// background copies 16 KiB per job and loop iteration besides the copies on write, measured at 200-320 MB/s
// for 1.2 GB on this 2-CPU box under load (docs/persistence.md); a quarter of the slowest, so that a loaded
// server still makes it, while a capture that cannot finish (workers gone mid-round) still ends.
constexpr double kCopyFloorBytesPerS = 50e6;
// The epoch a restored job starts in is the checkpoint's plus this (see restore_checkpoints).
constexpr uint16_t kRestoredEpochStep = 0x8001;
// A hierarchical ps job's weights and optimizer state are spread over its chunks' home hubs (docs/hierarchy.md).
constexpr std::string_view kHubPsNoCheckpoint =
    "a ps job spread over racks is not checkpointed: its weights and optimizer state live at each chunk's home "
    "hub, and no hub holds the whole job (docs/persistence.md)";

uint64_t ns_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// Where each chunk of this server's shard goes in the checkpoint's arrays: chunk id order. Returns the elements
// of each array.
uint64_t lay_out(const JobPlan& plan, CheckpointCapture& cap) {
  cap.offset.assign(plan.lcores, {});
  cap.steps.assign(plan.lcores, {});
  for (uint16_t l = 0; l < plan.lcores; ++l) {
    cap.offset[l].resize(plan.layout.owned(static_cast<uint16_t>(plan.first_owner + l)).size());
    cap.steps[l].resize(cap.offset[l].size());
  }
  uint64_t elems = 0;
  cap.chunks = 0;
  for (const auto& ci : plan.layout.chunks()) {
    if (ci.owner < plan.first_owner || ci.owner >= plan.first_owner + plan.lcores) continue;
    cap.offset[ci.owner - plan.first_owner][ci.local_index] = elems;
    elems += ci.elems;
    ++cap.chunks;
  }
  return elems;
}

// The arrays a capture copies into: one per state array of the optimizer, `elems` each.
void allocate_arrays(const JobPlan& plan, CheckpointCapture& cap, uint64_t elems,
                     const std::function<void()>& heartbeat) {
  // Reserved (no page touched), then grown and zeroed by 4 Mi elements with the heartbeat between: a
  // gigabyte's first touch takes a while.
  constexpr uint64_t kSlice = uint64_t{1} << 22;
  cap.arrays.assign(state_arrays(plan.math.optimizer), {});
  for (auto& a : cap.arrays) {
    a.reserve(elems);
    for (uint64_t at = 0; at < elems; at += kSlice) {
      a.resize(std::min(elems, at + kSlice));
      if (heartbeat) heartbeat();
    }
  }
}

uint64_t shard_elems(const CheckpointCapture& cap) { return cap.arrays.empty() ? 0 : cap.arrays[0].size(); }

uint64_t capture_bytes(const CheckpointCapture& cap) { return shard_elems(cap) * sizeof(float) * cap.arrays.size(); }

std::chrono::milliseconds copy_allowance(uint64_t bytes) {
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(bytes) / kCopyFloorBytesPerS * 1e3));
}

// Rounds start again at 0 in every epoch, and a restore takes the highest round: after writing round
// `round`, the files of this job shard with a higher round are of an earlier epoch, older than the one
// just written, and are removed. Returns how many.
size_t remove_later_rounds(const std::filesystem::path& dir, const persist::CheckpointId& id, uint32_t round) {
  const std::string written = persist::checkpoint_file_name(id, round);
  const std::string prefix = written.substr(0, written.size() - std::string("0000000000.phubckpt").size());
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != written.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - 9, 9, ".phubckpt") != 0 || name <= written) {
      continue;  // not of this job shard, or not a later round (same width: names sort by round)
    }
    std::error_code rm;
    if (std::filesystem::remove(e.path(), rm)) ++removed;
  }
  return removed;
}

// Whether the captured state holds NaN or Inf anywhere (weights or optimizer state), looked at in slices
// of 4 Mi elements with the heartbeat between.
bool holds_nonfinite(const CheckpointCapture& cap, const std::function<void()>& heartbeat) {
  constexpr size_t kSlice = size_t{1} << 22;
  for (const auto& a : cap.arrays) {
    for (size_t at = 0; at < a.size(); at += kSlice) {
      if (agg::any_nonfinite(a.data() + at, std::min(kSlice, a.size() - at))) return true;
      if (heartbeat) heartbeat();
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> Engine::supersede_if_fresh(size_t job_index) {
  const JobPlan& plan = *current_->jobs[job_index];
  if (!plan.math.ps || !plan.cfg.checkpoint.enabled() || hierarchical(plan.math)) return std::nullopt;
  LcoreJob& first = *current_->runtimes[job_index]->lcores[0];
  const uint32_t starts = __atomic_load_n(&first.fresh_weights_starts, __ATOMIC_ACQUIRE);
  auto& seen = fresh_seen_[plan.cfg.id];
  const uint32_t before = seen.first == &first ? seen.second : 0;  // a new runtime counts from 0
  seen = {&first, starts};
  if (starts == before) return std::nullopt;
  const size_t moved = persist::supersede_checkpoints(plan.cfg.checkpoint.dir, checkpoint_id(plan));
  for (size_t i = 0; i < moved; ++i) bump(first.counters.checkpoints_superseded);
  return job_label(plan.cfg) + ": a run with fresh weights started: " + std::to_string(moved) +
         " checkpoint file(s) of the earlier run set aside as *.superseded in " + plan.cfg.checkpoint.dir +
         " (no restore takes them)";
}

Expected<void, std::string> Engine::capture_once(size_t job_index, CheckpointCapture& cap,
                                                 std::chrono::steady_clock::time_point deadline, bool& retry) {
  retry = false;
  const JobPlan& plan = *current_->jobs[job_index];
  const JobRuntime& rt = *current_->runtimes[job_index];
  // Aim at the newest round any chunk completed: chunks past it by now make the attempt fail, and the
  // next one aims further.
  bool any = false;
  uint32_t newest = 0;
  uint16_t epoch = 0;
  for (const auto& lj : rt.lcores) {
    epoch = __atomic_load_n(&lj->epoch, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&lj->rounds_in_epoch, __ATOMIC_RELAXED)) continue;
    const uint32_t r = __atomic_load_n(&lj->newest_round, __ATOMIC_RELAXED);
    if (!any || round_delta(plan.math, r, newest) > 0) newest = r;
    any = true;
  }
  if (!any) return unexpected(std::string("no round completed in the job's current epoch yet: nothing to save"));
  cap.round = newest;
  cap.epoch = epoch;
  cap.copied.store(0);
  cap.failed.store(false);
  Request req;
  req.kind = RequestKind::capture;
  req.job_id = plan.cfg.id;
  req.capture = &cap;
  req.round = cap.round;
  const auto armed = ask_lcores(req);
  while (armed && cap.copied.load(std::memory_order_acquire) < cap.chunks && !cap.failed.load() &&
         std::chrono::steady_clock::now() < deadline) {
    if (!running_) {
      for (auto& l : lcores_) l->serve_requests_stopped(*current_);
    }
    if (heartbeat_) heartbeat_();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Whatever happened, no lcore may hold the capture past here.
  req.kind = RequestKind::detach;
  if (auto r = ask_lcores(req); !r) return r;
  if (!armed) return armed;
  if (cap.copied.load(std::memory_order_acquire) == cap.chunks && !cap.failed.load()) return {};
  if (cap.failed.load()) {
    retry = true;
    return unexpected("the chunks moved past round " + std::to_string(cap.round) + " or a new epoch started");
  }
  const uint32_t copied = cap.copied.load(std::memory_order_acquire);
  if (copied != 0) {
    return unexpected("copied " + std::to_string(copied) + " of " + std::to_string(cap.chunks) +
                      " chunks in time (round " + std::to_string(cap.round + 1) +
                      " not complete on the others: are the workers running?)");
  }
  return unexpected("no round boundary in time (round " + std::to_string(cap.round + 1) +
                    " not complete: are the workers running?)");
}

Expected<CheckpointWritten, std::string> Engine::checkpoint(std::string_view job_name,
                                                           std::chrono::milliseconds boundary_wait) {
  const int j = current_->job_by_name(job_name);
  if (j < 0) return unexpected("no job named '" + std::string(job_name) + "'");
  const JobPlan& plan = *current_->jobs[static_cast<size_t>(j)];
  const std::string who = job_label(plan.cfg);
  if (!plan.math.ps) return unexpected(who + " is an allreduce job: only ps jobs keep state to checkpoint");
  if (hierarchical(plan.math)) return unexpected(who + ": " + std::string(kHubPsNoCheckpoint));
  if (!plan.cfg.checkpoint.enabled()) {
    return unexpected(who + " has no checkpoint directory (set checkpoints.dir or the job's checkpoint.dir)");
  }
  LcoreJob& first = *current_->runtimes[static_cast<size_t>(j)]->lcores[0];
  (void)supersede_if_fresh(static_cast<size_t>(j));  // before the write: the new run's file must stay
  auto fail = [&](const std::string& why) -> Expected<CheckpointWritten, std::string> {
    bump(first.counters.checkpoints_failed);  // the control thread is this field's one writer
    return unexpected(who + ": checkpoint failed: " + why);
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (heartbeat_) heartbeat_();
  CheckpointCapture cap;
  allocate_arrays(plan, cap, lay_out(plan, cap), heartbeat_);
  Expected<void, std::string> got = unexpected(std::string());
  bool retry = true;
  // The wait for the boundary, plus what copying this much state may take (a state of any size).
  const auto deadline = t0 + boundary_wait + copy_allowance(capture_bytes(cap));
  for (int attempt = 0; attempt < kCaptureAttempts && retry; ++attempt) {
    got = capture_once(static_cast<size_t>(j), cap, deadline, retry);
  }
  if (!got) return fail(got.error());
  const auto t1 = std::chrono::steady_clock::now();

  uint64_t step = cap.steps.empty() || cap.steps[0].empty() ? 0 : cap.steps[0][0];
  for (const auto& per_lcore : cap.steps) {
    for (uint64_t s : per_lcore) {
      if (s != step) return fail("the chunks' optimizer steps differ (" + std::to_string(s) + " and " + std::to_string(step) + ")");
    }
  }
  if (holds_nonfinite(cap, heartbeat_)) {
    bump(first.counters.checkpoints_nonfinite);
    return fail("the state after round " + std::to_string(cap.round) +
                " holds NaN or Inf (an optimizer step overflowed?): not written, the earlier files are kept");
  }
  persist::CheckpointMeta meta{checkpoint_id(plan), cap.round, cap.epoch, shard_elems(cap), step};
  std::vector<std::span<const float>> spans(cap.arrays.begin(), cap.arrays.end());
  auto file = persist::write_checkpoint(plan.cfg.checkpoint.dir, meta, spans, checkpoint_key(plan), heartbeat_);
  if (!file) return fail(file.error());
  if (heartbeat_) heartbeat_();
  const auto t2 = std::chrono::steady_clock::now();

  CheckpointWritten w;
  w.file = *file;
  w.round = cap.round;
  w.epoch = cap.epoch;
  w.step = step;
  w.state_bytes = capture_bytes(cap);
  std::error_code ec;
  w.file_bytes = std::filesystem::file_size(*file, ec);
  w.copy_ns = ns_between(t0, t1);
  w.write_ns = ns_between(t1, t2);
  w.pruned = remove_later_rounds(plan.cfg.checkpoint.dir, meta.id, cap.round) +
             persist::prune_checkpoints(plan.cfg.checkpoint.dir, meta.id, plan.cfg.checkpoint.keep);
  bump(first.counters.checkpoints_written);
  schedules_[plan.cfg.id] = CheckpointSchedule{t2, cap.round, true, cap.epoch};
  return w;
}

std::vector<std::string> Engine::checkpoint_due() {
  std::vector<std::string> lines;
  const auto now = std::chrono::steady_clock::now();
  for (size_t j = 0; j < current_->jobs.size(); ++j) {
    if (auto line = supersede_if_fresh(j)) lines.push_back(*line);
    const JobPlan& plan = *current_->jobs[j];
    const config::Checkpoints& k = plan.cfg.checkpoint;
    if (!plan.math.ps || !k.enabled() || (k.every_rounds == 0 && k.every_s == 0)) continue;
    CheckpointSchedule& s = schedules_.try_emplace(plan.cfg.id, CheckpointSchedule{now, 0, false, 0}).first->second;
    const LcoreJob& lj = *current_->runtimes[j]->lcores[0];
    bool any = false;
    uint32_t newest = 0;
    for (const auto& l : current_->runtimes[j]->lcores) {
      if (!__atomic_load_n(&l->rounds_in_epoch, __ATOMIC_RELAXED)) continue;
      const uint32_t r = __atomic_load_n(&l->newest_round, __ATOMIC_RELAXED);
      if (!any || round_delta(plan.math, r, newest) > 0) newest = r;
      any = true;
    }
    if (!any) continue;  // nothing new to save in this epoch
    const uint16_t epoch = __atomic_load_n(&lj.epoch, __ATOMIC_RELAXED);
    if (s.has_round && s.epoch == epoch && newest == s.last_round) continue;  // nothing new since the last one
    const bool by_time = k.every_s != 0 && now - s.last >= std::chrono::seconds(k.every_s);
    const bool new_epoch = !s.has_round || s.epoch != epoch;
    const uint64_t rounds_since = new_epoch ? uint64_t{newest} + 1
                                            : static_cast<uint64_t>(std::max<int64_t>(
                                                  round_delta(plan.math, newest, s.last_round), 0));
    const bool by_rounds = k.every_rounds != 0 && rounds_since >= k.every_rounds;
    if (!by_time && !by_rounds) continue;
    auto w = checkpoint(plan.cfg.name, kScheduledBoundaryWait);
    if (w) {
      lines.push_back(job_label(plan.cfg) + ": checkpoint of round " + std::to_string(w->round) + " written to " +
                      w->file.string() + " (" + std::to_string(w->file_bytes) + " bytes, copy " +
                      std::to_string(w->copy_ns / 1000) + " us, write " + std::to_string(w->write_ns / 1000) + " us)");
    } else {
      s.last = now;  // tried: the next attempt waits for the interval again
      s.last_round = newest;
      s.has_round = true;
      s.epoch = epoch;
      lines.push_back(w.error());
    }
  }
  return lines;
}

Expected<void, std::string> Engine::restore_checkpoints() {
  for (size_t j = 0; j < current_->jobs.size(); ++j) {
    const JobPlan& plan = *current_->jobs[j];
    const config::Checkpoints& k = plan.cfg.checkpoint;
    if (!plan.math.ps || !k.enabled()) continue;
    const std::string who = job_label(plan.cfg);
    if (hierarchical(plan.math)) {
      restore_lines_.push_back(who + ": not restored: " + std::string(kHubPsNoCheckpoint));
      continue;
    }
    if (auto trusted = persist::check_directory(k.dir); !trusted) {
      return unexpected("jobs[" + std::to_string(j + 1) + "].checkpoint.dir: " + trusted.error());
    }
    CheckpointCapture shape;  // the offsets only: the restored file holds the arrays
    const uint64_t elems = lay_out(plan, shape);
    // A file is refused by its header (job, shard, config, the state's shape) before it is inflated.
    const persist::Expectation expect{checkpoint_id(plan), state_arrays(plan.math.optimizer), elems};
    persist::Restored r = persist::restore_newest(k.dir, expect, checkpoint_key(plan));
    for (const auto& skipped : r.skipped) restore_lines_.push_back(who + ": checkpoint skipped: " + skipped);
    if (!r.checkpoint) {
      restore_lines_.push_back(who + ": no valid checkpoint in " + k.dir + ": starting without state");
      continue;
    }
    const persist::Checkpoint& cp = *r.checkpoint;
    // The restored state starts a new epoch: packets of the runs the server lost are refused and answered
    // with the new epoch, and the chunks wait for the round after the checkpoint's. Not the file's epoch
    // + 1: a run that restarted the job after the checkpoint was written holds that epoch (or the next
    // few), and its packets would count towards rounds of state it never saw. Half the epoch space away,
    // no such run can hold it (that would take 32,768 restarts without a checkpoint).
    const auto epoch = static_cast<uint16_t>(cp.meta.epoch + kRestoredEpochStep);
    auto& rt = *current_->runtimes[j];
    for (uint16_t l = 0; l < plan.lcores; ++l) {
      LcoreJob& lj = *rt.lcores[l];
      for (uint32_t i = 0; i < lj.chunk_count(); ++i) {
        install_chunk_state(plan.math, lj.chunk(i), cp.meta.round, cp.arrays, shape.offset[l][i], cp.meta.step);
      }
      lj.epoch = epoch;
      lj.epoch_first_round = next_round(plan.math, cp.meta.round);
      lj.newest_round = cp.meta.round;
      lj.rounds_in_epoch = true;
    }
    schedules_[plan.cfg.id] = CheckpointSchedule{std::chrono::steady_clock::now(), cp.meta.round, true, epoch};
    restore_lines_.push_back(who + ": restored the state after round " + std::to_string(cp.meta.round) + " (epoch " +
                             std::to_string(cp.meta.epoch) + ", step " + std::to_string(cp.meta.step) + ") from " +
                             r.file.string() + "; the job resumes in epoch " + std::to_string(epoch) + " at round " +
                             std::to_string(next_round(plan.math, cp.meta.round)));
  }
  return {};
}

}  // namespace phub::engine

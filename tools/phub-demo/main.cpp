// phub-demo-worker: one rank of a phub job driven through the C API of libphub-client, with every result
// element verified against independently computed values; prints one summary line, exits non-zero on any
// mismatch or error.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "job.hpp"
#include "pattern.hpp"
#include "phub/client.h"

namespace phub::demo {
namespace {

struct Outcome {
  uint64_t rounds = 0;
  // allreduce: each round's start and end (steady clock), its keys' operations
  std::vector<std::pair<int64_t, int64_t>> round_spans_ns;
  uint64_t mismatches = 0;
  int status = PHUB_OK;
  std::string error;
};

using Clock = std::chrono::steady_clock;

struct Keys {
  std::vector<uint64_t> elems;
  std::vector<std::vector<std::byte>> bufs;
  uint64_t total_bytes = 0;
};

Keys make_keys(const DemoJob& j) {
  Keys k;
  for (const auto& key : j.job.keys) {
    k.elems.push_back(key.elems);
    k.bufs.emplace_back(key.elems * dtype_bytes(j.job.dtype));
    k.total_bytes += k.bufs.back().size();
  }
  return k;
}

// Runs one operation per key (all in flight at once unless `sync`), waiting for all. Returns a status.
template <class Post, class Run>
int run_keys(phub_client* c, size_t keys, bool sync, Post&& post, Run&& run, std::string& error) {
  std::vector<phub_request*> reqs(keys, nullptr);
  int status = PHUB_OK;
  for (size_t k = 0; k < keys && status == PHUB_OK; ++k) status = sync ? run(k) : post(k, &reqs[k]);
  for (size_t k = 0; k < keys; ++k) {
    if (reqs[k] == nullptr) continue;
    const int s = phub_wait(c, reqs[k]);
    if (status == PHUB_OK) status = s;
  }
  if (status != PHUB_OK) error = phub_last_error();
  return status;
}

// The vote element (key 0, element 0) says whether this rank wants to stop; the sum of votes is known to all.
void write_vote(Dtype d, std::byte* buf, bool stop) {
  const float v = stop ? 1.0f : 0.0f;
  narrow(d, std::span<const float>(&v, 1), buf);
}

// One line per round: its start and end in nanoseconds of the steady clock (CLOCK_MONOTONIC, shared by every
// process on the machine, so a test can line rounds up with its own events).
bool write_round_times(const std::string& path, const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  for (const auto& [start, end] : spans) std::fprintf(f, "%" PRId64 " %" PRId64 "\n", start, end);
  return std::fclose(f) == 0;
}

Outcome run_allreduce(phub_client* c, const DemoJob& j, const Args& a, Keys& keys) {
  Outcome o;
  const Dtype d = j.job.dtype;
  const bool mean = j.job.reduce == config::Reduce::mean;
  const uint32_t workers = j.job.workers;
  const auto start = Clock::now();
  for (uint32_t round = 0;; ++round) {
    const bool vote = a.seconds > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= a.seconds;
    for (size_t k = 0; k < keys.bufs.size(); ++k) {
      fill_grads(d, static_cast<uint32_t>(a.rank), round, static_cast<uint32_t>(k), keys.bufs[k].data(), keys.elems[k]);
    }
    if (a.seconds > 0) write_vote(d, keys.bufs[0].data(), vote);
    const auto round_start = Clock::now();
    o.status = run_keys(
        c, keys.bufs.size(), a.sync,
        [&](size_t k, phub_request** r) { return phub_allreduce_async(c, static_cast<uint32_t>(k), keys.bufs[k].data(), r); },
        [&](size_t k) { return phub_allreduce(c, static_cast<uint32_t>(k), keys.bufs[k].data()); }, o.error);
    if (o.status != PHUB_OK) return o;
    o.round_spans_ns.emplace_back(std::chrono::nanoseconds(round_start.time_since_epoch()).count(),
                                  std::chrono::nanoseconds(Clock::now().time_since_epoch()).count());
    const uint64_t skip = a.seconds > 0 ? 0 : UINT64_MAX;
    for (size_t k = 0; k < keys.bufs.size(); ++k) {
      o.mismatches += count_allreduce_mismatches(d, workers, mean, round, static_cast<uint32_t>(k), keys.bufs[k].data(),
                                                 keys.elems[k], k == 0 ? skip : UINT64_MAX);
    }
    ++o.rounds;
    if (a.seconds > 0) {
      float votes = 0;
      widen(d, keys.bufs[0].data(), std::span<float>(&votes, 1));
      if (mean) votes *= static_cast<float>(workers);
      const bool valid = votes >= 0 && votes <= static_cast<float>(workers) && votes == static_cast<float>(static_cast<int>(votes));
      if (!valid) ++o.mismatches;
      if (!valid || votes > 0) return o;
    } else if (o.rounds == a.rounds) {
      return o;
    }
  }
}

Outcome run_ps(phub_client* c, const DemoJob& j, const Args& a, Keys& keys) {
  Outcome o;
  const Dtype d = j.job.dtype;
  const uint32_t workers = j.job.workers;
  const float grad_scale = j.job.reduce == config::Reduce::mean ? 1.0f / static_cast<float>(workers) : 1.0f;
  std::vector<PsModel> models;
  std::vector<std::vector<std::byte>> weights;
  for (size_t k = 0; k < keys.bufs.size(); ++k) {
    models.emplace_back(j.optimizer, static_cast<uint32_t>(k), keys.elems[k], grad_scale);
    weights.emplace_back(keys.bufs[k].size());
    if (a.rank == 0) models[k].init_bytes(d, weights[k].data());
  }
  for (size_t k = 0; k < keys.bufs.size() && o.status == PHUB_OK; ++k) {
    o.status = phub_init(c, static_cast<uint32_t>(k), weights[k].data());
    if (o.status != PHUB_OK) o.error = phub_last_error();
    else o.mismatches += models[k].mismatches(d, weights[k].data());  // other ranks receive the weights
  }
  if (o.status != PHUB_OK) return o;
  for (uint32_t round = 0; round < a.rounds; ++round) {
    for (size_t k = 0; k < keys.bufs.size(); ++k) {
      fill_grads(d, static_cast<uint32_t>(a.rank), round, static_cast<uint32_t>(k), keys.bufs[k].data(), keys.elems[k]);
    }
    o.status = run_keys(
        c, keys.bufs.size(), a.sync,
        [&](size_t k, phub_request** r) {
          return phub_step_async(c, static_cast<uint32_t>(k), keys.bufs[k].data(), weights[k].data(), r);
        },
        [&](size_t k) { return phub_step(c, static_cast<uint32_t>(k), keys.bufs[k].data(), weights[k].data()); },
        o.error);
    if (o.status != PHUB_OK) return o;
    for (size_t k = 0; k < keys.bufs.size(); ++k) {
      models[k].step(workers, round);
      o.mismatches += models[k].mismatches(d, weights[k].data());
    }
    ++o.rounds;
  }
  return o;
}

int run(int argc, char** argv) {
  auto args = parse_args(argc, argv);
  if (!args) {
    std::fprintf(stderr, "phub-demo-worker: %s", args.error().c_str());
    return 2;
  }
  if (args->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  auto job = load_job(*args);
  if (!job) {
    std::fprintf(stderr, "phub-demo-worker: %s\n", job.error().c_str());
    return 2;
  }
  const phub_config cfg = client_config(*job, *args);
  phub_client* c = nullptr;
  if (phub_connect(&cfg, &c) != PHUB_OK) {
    std::fprintf(stderr, "phub-demo-worker: connect: %s\n", phub_last_error());
    return 2;
  }
  Keys keys = make_keys(*job);
  int status = PHUB_OK;
  for (size_t k = 0; k < keys.elems.size() && status == PHUB_OK; ++k) {
    status = phub_register(c, static_cast<uint32_t>(k), keys.elems[k], cfg.dtype);
  }
  Outcome o;
  const auto start = Clock::now();
  if (status != PHUB_OK) {
    o.status = status;
    o.error = phub_last_error();
  } else {
    o = cfg.mode == PHUB_MODE_PS ? run_ps(c, *job, *args, keys) : run_allreduce(c, *job, *args, keys);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  phub_stats st{};
  (void)phub_get_stats(c, &st);
  (void)phub_close(c);

  if (!args->round_times.empty() && !write_round_times(args->round_times, o.round_spans_ns)) {
    std::fprintf(stderr, "phub-demo-worker: cannot write %s: %s\n", args->round_times.c_str(), std::strerror(errno));
    return 2;
  }
  const bool good = o.status == PHUB_OK && o.mismatches == 0;
  // The median round: what a round takes when no retransmit timeout falls into it.
  double median_ms = 0;
  if (!o.round_spans_ns.empty()) {
    std::vector<int64_t> round_ns;
    for (const auto& [first_ns, last_ns] : o.round_spans_ns) round_ns.push_back(last_ns - first_ns);
    auto mid = round_ns.begin() + static_cast<std::ptrdiff_t>(round_ns.size() / 2);
    std::nth_element(round_ns.begin(), mid, round_ns.end());
    median_ms = static_cast<double>(*mid) / 1e6;
  }
  const double reduced = static_cast<double>(o.rounds) * static_cast<double>(keys.total_bytes);
  std::printf("phub-demo-worker job=%s rank=%d mode=%s dtype=%s rounds=%" PRIu64 " bytes_per_round=%" PRIu64
              " seconds=%.3f round_ms_median=%.3f goodput=%.3fGbit/s mismatches=%" PRIu64 " retransmits=%" PRIu64 " rerequests=%" PRIu64
              " timeouts=%" PRIu64 " fast_retransmits=%" PRIu64 " duplicates=%" PRIu64 " stale=%" PRIu64 " bad_tag=%" PRIu64 " errors=%" PRIu64 " malformed=%" PRIu64 " window=%u srtt_us=%u rto_us=%u reorder_us=%u needless=%" PRIu64 " rejoins=%u replayed=%" PRIu64 " bad_mac=%" PRIu64 " bad_checksum=%" PRIu64 " sessions=%u moved=%u gso=%u gro=%u "
              "pkts_per_send=%.1f pkts_per_recv=%.1f gro_coalesced=%" PRIu64 " status=%s\n",
              job->job.name.c_str(), args->rank, cfg.mode == PHUB_MODE_PS ? "ps" : "allreduce",
              std::string(dtype_name(job->job.dtype)).c_str(), o.rounds, keys.total_bytes, seconds, median_ms,
              seconds > 0 ? reduced * 8 / seconds / 1e9 : 0.0, o.mismatches, st.retransmits, st.rerequests, st.timeouts, st.fast_retransmits,
              st.duplicates, st.stale, st.bad_tag, st.errors_received, st.malformed, st.window_packets, st.srtt_us, st.rto_us, st.reorder_window_us, st.needless_resends, st.rejoins, st.replayed, st.bad_mac, st.bad_checksum, st.sessions, st.interface_moves, st.gso, st.gro,
              st.send_batches != 0 ? static_cast<double>(st.packets_sent) / static_cast<double>(st.send_batches) : 0.0,
              st.recv_batches != 0 ? static_cast<double>(st.packets_received) / static_cast<double>(st.recv_batches) : 0.0,
              st.gro_coalesced,
              good ? "OK" : (o.status != PHUB_OK ? phub_status_name(o.status) : "MISMATCH"));
  if (o.status != PHUB_OK) std::fprintf(stderr, "phub-demo-worker rank %d: %s\n", args->rank, o.error.c_str());
  std::fflush(stdout);
  return good ? 0 : 1;
}

}  // namespace
}  // namespace phub::demo

int main(int argc, char** argv) { return phub::demo::run(argc, argv); }

// One epoch's schedule and its checks. The emulated workers of every job push, duplicate, lose, resend,
// push late, rerequest, pull, stall and recover in a seeded random order, within the client contract: a
// rank pushes round r+1 of a chunk only once it holds every segment's result of round r of that chunk
// (schedule.cpp). Every frame the server sends back is checked as it arrives, against the model and
// against what the ranks may be owed (receive.cpp).
#pragma once

#include <rte_mbuf.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "failure.hpp"
#include "harness.hpp"
#include "job_run.hpp"
#include "rng.hpp"

namespace phub::stress {

// Counts over the whole epoch.
struct EpochTally {
  uint64_t results_checked = 0;   // result frames compared with the model
  uint64_t elements_checked = 0;  // their elements
  uint64_t misdirected = 0;       // frames sent to the queue of an lcore that does not own their chunk
};

class Driver {
 public:
  Driver(uint64_t seed, uint64_t epoch, const EpochShape& shape, std::vector<std::unique_ptr<JobRun>>& jobs,
         const engine::Engine& engine, test::Workers& wire);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Until every rank of every job holds every round's results.
  void run();
  // Afterwards: delayed frames go out and in, every frame still coming is received and checked, and the
  // engine's transmit mbufs all return to their pools (else a Failure).
  void drain();
  [[nodiscard]] const EpochTally& tally() const noexcept { return tally_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Outcome : uint8_t { waiting, acted, done };
  struct Todo {  // a first push (or, ps, rank 0's first init) of a segment
    uint32_t job;
    uint32_t chunk;
    uint32_t seg;
    uint16_t rank;
    bool init;
  };
  struct Deferred {  // a copy of a push that the network delivers later
    uint64_t due_tick;
    uint32_t job, chunk, seg;
    uint16_t rank, flags;
    int64_t round;
  };
  struct Arrival {  // a result frame's place, read from its header when it arrived
    uint32_t job, chunk, seg, first, count;
    uint16_t rank, queue;
    int64_t round;  // the label as an absolute round
  };
  struct Held {  // a result frame read later than it arrived
    uint64_t due_tick;
    rte_mbuf* m;
    Arrival arrival;
  };

  // schedule.cpp: the workers' side.
  void add_round_todos(uint32_t job, uint32_t chunk, uint16_t rank);
  bool try_todo();
  Outcome first_push(JobRun& j, const Todo& t);
  Outcome first_init(JobRun& j, const Todo& t);
  void extras(JobRun& j, uint32_t chunk, uint16_t rank);
  void try_pull(JobRun& j, uint32_t chunk, uint16_t rank);
  void try_init_again(JobRun& j, uint32_t chunk, uint32_t seg);
  bool recover_some();
  bool recover(JobRun& j, uint32_t chunk, uint16_t rank);
  bool resend_inits(JobRun& j, uint32_t chunk);
  void stall(JobRun& j, uint16_t rank);
  [[nodiscard]] bool stalled(const JobRun& j, uint16_t rank) const noexcept;
  // A worker's retransmission timeout: 1 to 4 ms after its last progress on the chunk.
  [[nodiscard]] Clock::time_point recovery_time() noexcept {
    return now_ + std::chrono::microseconds(1000 + rng_.below(3000));
  }
  // Before the schedule: every rank of every job joins and keeps its address cookie.
  void join_all();
  [[nodiscard]] bool may_send();
  void send_push(JobRun& j, uint16_t rank, uint32_t chunk, uint32_t seg, int64_t round, uint16_t flags, EventKind why);
  void send_init(JobRun& j, uint32_t chunk, uint32_t seg, uint16_t flags);
  void send_request(JobRun& j, proto::Opcode op, uint16_t rank, uint32_t chunk, std::optional<uint32_t> seg,
                    int64_t round);
  void send(JobRun& j, uint16_t rank, uint32_t chunk, proto::Header h, std::span<const std::byte> payload,
            const Event& e);
  void release_deferred(bool all);
  [[nodiscard]] bool all_done() const noexcept;

  // receive.cpp: the server's answers.
  size_t poll();
  void on_frame(rte_mbuf* m, uint16_t queue);
  void check_route(const JobRun& j, const proto::PhubFrame& f, uint16_t queue) const;
  [[nodiscard]] Arrival check_result_header(const JobRun& j, const proto::PhubFrame& f, uint16_t queue) const;
  void on_error(JobRun& j, const proto::PhubFrame& f);
  void release_held(bool all);
  void deliver(const Arrival& a, std::span<const std::byte> payload, EventKind how);
  void count_result(JobRun& j, const Arrival& a);
  [[nodiscard]] std::optional<std::string> differs(JobRun& j, const Arrival& a, int64_t round,
                                                   std::span<const std::byte> payload) const;
  [[nodiscard]] std::optional<std::string> differs_from_first_copy(JobRun& j, const Arrival& a,
                                                                   std::span<const std::byte> payload) const;
  [[noreturn]] void fail(const std::string& what) const;

  uint16_t lcores_;
  uint32_t round_stall_ms_;
  Rng rng_;
  std::vector<std::unique_ptr<JobRun>>& jobs_;
  const engine::Engine& engine_;
  test::Workers& wire_;
  MacAddr server_mac_;
  EpochTally tally_;
  EventLog log_;
  uint64_t tick_ = 0;
  Clock::time_point now_;
  std::vector<Todo> todo_;
  std::vector<Deferred> deferred_;
  std::vector<Held> held_;
  size_t recover_cursor_ = 0;
  std::vector<std::byte> frame_;  // scratch: the frame being read
  // Flow control (may_send): frames sent and read, and when the server's side was last looked at.
  uint64_t frames_sent_ = 0;
  uint64_t frames_read_ = 0;
  uint64_t window_checked_at_ = 0;
  bool window_open_ = true;
};

}  // namespace phub::stress

// A scripted peer for the emulated workers' state machine: it answers each push with what a correct server
// returns for it (taken from the test's own Verifier) and can lose, repeat, hold back, shuffle or corrupt
// answers, i.e. a misbehaving network. It models no server rule (no aggregation, no round tracking); the
// generator against the real phub-server is tested in tests/dpdk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <random>
#include <vector>

#include "phub/gen/partition.hpp"

namespace phub::gen::test {

struct Answer {
  uint16_t rank = 0;
  uint32_t slot = 0;
  uint32_t wire_round = 0;
  std::vector<std::byte> payload;
};

class Peer {
 public:
  Peer(const Workload& wl, const SlotMap& slots) : wl_(wl), truth_(wl, slots) {}

  // The correct answer to one push: the init acknowledgement (rank 0, round 0) or the round's result.
  Answer answer(const PushOrder& o) {
    const auto want = o.init ? truth_.expected_init_ack(o.slot) : truth_.expected_result(o.slot, o.round);
    if (want.empty()) std::abort();  // the tests never ask about rounds the model forgot
    return Answer{o.init ? uint16_t{0} : o.rank, o.slot, o.init ? wl_.init_ack_round() : wl_.wire_round(o.round),
                  std::vector<std::byte>(want.begin(), want.end())};
  }

 private:
  const Workload& wl_;
  Verifier truth_;
};

// One partition of a job, the peer, a simulated clock and the misbehaviours the test asks for.
struct Rig {
  explicit Rig(const JobSpec& s, std::span<const uint16_t> owners = {})
      : wl(build(s)), p(wl, owners), peer(wl, p.slots()) {}

  static Workload build(const JobSpec& s) {
    auto w = Workload::build(s, 1500);
    if (!w) std::abort();  // the tests only use valid specs
    return std::move(*w);
  }

  // Pushes the partition wants sent now (closed loop, then up to `open_budget` open-loop ones).
  std::vector<PushOrder> take(size_t open_budget = 0) {
    std::vector<PushOrder> out(256);
    size_t n = p.poll(now_ns, out);
    if (open_budget != 0 && n < out.size()) {
      n += p.open_pushes(now_ns, std::span(out).subspan(n, std::min(open_budget, out.size() - n)));
    }
    out.resize(n);
    return out;
  }

  // Answer what `take` produced (pushes marked drop never reach the peer), then advance the clock.
  void step(size_t open_budget = 0) {
    for (const auto& o : take(open_budget)) {
      if (!o.drop) queued.push_back(peer.answer(o));
    }
    if (shuffle) std::shuffle(queued.begin(), queued.end(), rng);
    for (; !queued.empty(); queued.pop_front()) {
      if (lose_every != 0 && ++answers % lose_every == 0) continue;
      const Answer& a = queued.front();
      (void)p.on_result(a.rank, a.slot, a.wire_round, a.payload, now_ns);
    }
    now_ns += 10'000;
  }

  template <class Done>
  bool run_until(Done done, size_t max_steps, size_t open_budget = 0) {
    for (size_t i = 0; i < max_steps && !done(); ++i) step(open_budget);
    return done();
  }

  bool run_rounds(const Knobs& k, size_t max_steps = 20000) {
    p.start(k, now_ns);
    return run_until([&] { return p.rounds_done(); }, max_steps);
  }

  Workload wl;
  Partition p;
  Peer peer;
  uint64_t now_ns = 1'000'000;
  std::deque<Answer> queued;
  bool shuffle = false;
  uint64_t lose_every = 0;  // lose every n-th answer (0: none)
  uint64_t answers = 0;
  std::mt19937_64 rng{7};
};

}  // namespace phub::gen::test

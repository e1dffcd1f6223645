// Several engines in one process (the hubs of the hierarchy tests to come): each on its own net_ring link
// and lcore, with its own pools and rings, serving its own workers at the same time.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace phub::test {
namespace {

struct Hub {
  RingLink link{1};
  config::Config cfg;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Workers> workers;

  explicit Hub(unsigned lcore_id) {
    cfg = make_config(link.server_name(), 1, {make_job(1, 2, {3 * 352})});
    cfg.lcores[0].id = lcore_id;
    auto e = engine::Engine::create(cfg);
    if (!e) throw std::runtime_error(e.error());
    engine = std::move(*e);
    auto started = engine->start();
    if (!started) throw std::runtime_error(started.error());
    workers = std::make_unique<Workers>(link.worker_name(), 1, *engine);
    (void)workers->layout(cfg.jobs[0], 1);
  }
  ~Hub() {
    engine->stop();
    workers.reset();
    engine.reset();
  }

  // Every rank pushes (rank + 1) * scale to every segment of round 0.
  void push_round(float scale) {
    const auto& job = cfg.jobs[0];
    const auto& l = workers->layout(job, 1);
    for (uint16_t rank = 0; rank < job.workers; ++rank) {
      for (uint32_t seg = 0; seg < l.chunk(0).segments; ++seg) {
        proto::Header h;
        h.opcode = proto::Opcode::push;
        h.rank = rank;
        h.elem_offset = l.segment_offset(seg);
        h.elem_count = static_cast<uint16_t>(l.segment_count_elems(l.chunk(0), seg));
        workers->send(job, rank, h, encode(std::vector<float>(h.elem_count, (rank + 1) * scale), Dtype::fp32));
      }
    }
  }
};

TEST(Hubs, TwoEnginesInOneProcessServeTheirOwnWorkers) {
  Hub a(1), b(2);
  a.push_round(1.0f);
  b.push_round(10.0f);
  // 2 ranks x 3 segments of results on each link, each the sum over its own engine's ranks only.
  for (auto [hub, sum] : {std::pair{&a, 3.0f}, std::pair{&b, 30.0f}}) {
    auto got = hub->workers->receive(6);
    ASSERT_EQ(got.size(), 6u);
    for (const auto& r : got) {
      EXPECT_EQ(r.hdr.opcode, proto::Opcode::result);
      for (float v : decode(r.payload, Dtype::fp32)) ASSERT_EQ(v, sum);
    }
    EXPECT_EQ(job_counters(*hub->engine, 0).rounds_completed, 1u);
  }
}

}  // namespace
}  // namespace phub::test

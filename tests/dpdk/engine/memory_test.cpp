// The job memory formula against what the data plane really takes from the DPDK heap.
#include <gtest/gtest.h>
#include <rte_malloc.h>

#include "harness.hpp"

namespace phub::test {
namespace {

uint64_t heap_allocated() {
  rte_malloc_socket_stats st{};
  EXPECT_EQ(rte_malloc_get_socket_stats(0, &st), 0);
  return st.heap_allocsz_bytes;
}

struct JobShape {
  const char* name;
  config::JobMode mode;
  config::OptimizerKind opt;
  Dtype dtype;
  bool deterministic;
  uint16_t workers;
  uint16_t lcores;
  std::vector<uint64_t> keys;
};

class MemoryFormula : public ::testing::TestWithParam<JobShape> {};

TEST_P(MemoryFormula, MatchesRealAllocationWithinOnePercent) {
  const JobShape& p = GetParam();
  auto job = make_job(1, p.workers, p.keys, p.dtype);
  job.mode = p.mode;
  job.optimizer.kind = p.opt;
  job.deterministic = p.deterministic;
  auto plan = engine::plan_job(job, p.lcores, 1500, agg::select_kernels());
  ASSERT_TRUE(plan.has_value()) << plan.error();

  const uint64_t before = heap_allocated();
  std::vector<std::unique_ptr<engine::LcoreJob>> parts;
  uint64_t accounted = 0;
  for (uint16_t l = 0; l < p.lcores; ++l) {
    auto lj = engine::LcoreJob::create(*plan, l, 0);
    ASSERT_TRUE(lj.has_value()) << lj.error();
    accounted += (*lj)->allocated_bytes;
    parts.push_back(std::move(*lj));
  }
  const uint64_t used = heap_allocated() - before;
  const uint64_t formula = plan->memory.data_plane();
  EXPECT_EQ(accounted, formula) << "the formula and the allocator's own accounting disagree";
  // The heap adds a small header per allocation (5 per lcore) on top of what was asked for.
  const double rel = std::abs(static_cast<double>(used) - static_cast<double>(formula)) / static_cast<double>(formula);
  EXPECT_LT(rel, 0.01) << p.name << ": formula " << formula << " bytes, heap grew " << used << " bytes";
  EXPECT_GE(used, formula);
  parts.clear();
  EXPECT_EQ(heap_allocated(), before);
}

INSTANTIATE_TEST_SUITE_P(
    Jobs, MemoryFormula,
    ::testing::Values(
        JobShape{"allreduce_fp32", config::JobMode::allreduce, config::OptimizerKind::sgd, Dtype::fp32, false, 4, 2,
                 {1'000'000, 4096, 10}},
        JobShape{"ps_adam", config::JobMode::ps, config::OptimizerKind::adam, Dtype::fp32, false, 8, 2, {300'000}},
        JobShape{"ps_momentum_bf16", config::JobMode::ps, config::OptimizerKind::momentum, Dtype::bf16, false, 2, 1,
                 {123'457}},
        JobShape{"deterministic_bf16", config::JobMode::allreduce, config::OptimizerKind::sgd, Dtype::bf16, true, 16,
                 2, {500'000, 3}}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace phub::test

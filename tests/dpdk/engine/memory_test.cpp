// The job memory formula against what the data plane really takes from the DPDK heap.
#include <gtest/gtest.h>
#include <rte_malloc.h>

#include "eal_main.hpp"
#include "harness.hpp"
#include "phub/drivers/mempool.hpp"
#include "phub/engine/budget.hpp"

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

uint64_t budget_item(const engine::MemoryBudget& b, std::string_view prefix) {
  for (const auto& i : b.items) {
    if (i.what.starts_with(prefix)) return i.bytes;
  }
  ADD_FAILURE() << "no budget item " << prefix;
  return 0;
}

// This binary's EAL runs on --no-huge: 4 KiB pages.
constexpr uint64_t kPageBytes = 4096;

// One packet mempool against the heap: objects, ring and header with its per-lcore caches, within 1 %.
TEST(ServerBudget, PoolFormulaMatchesTheHeap) {
  for (const engine::MbufPoolPlan& plan : {engine::MbufPoolPlan{"budget_rx", 4095, 2176, 32, 256},
                                           engine::MbufPoolPlan{"budget_ext", 8191, 0, 0, 256},
                                           engine::MbufPoolPlan{"budget_jumbo", 1023, 10368, 32, 256}}) {
    const uint64_t before = heap_allocated();
    auto pool = drivers::Mempool::create(plan.purpose, plan.mbufs, plan.data_room_bytes, 0, plan.cache,
                                         plan.priv_bytes);
    ASSERT_TRUE(pool.has_value()) << pool.error();
    const uint64_t used = heap_allocated() - before;
    const uint64_t formula = engine::mbuf_pool_bytes(plan, kPageBytes);
    std::printf("%s: heap grew %llu bytes, formula %llu\n", plan.purpose.c_str(), (unsigned long long)used,
                (unsigned long long)formula);
    EXPECT_NEAR(static_cast<double>(used), static_cast<double>(formula), 0.01 * static_cast<double>(formula))
        << plan.purpose;
  }
}

// The server's budget (phub/engine/budget.hpp) against what Engine::create takes from the heap: pools,
// rings and job state all counted, the count not far above (net_ring has no descriptor rings; the copy pool
// the budget always counts is made only where the port cannot send chains).
TEST(ServerBudget, CoversWhatTheEngineTakes) {
  RingLink link(2);
  auto cfg = make_config(link.server_name(), 2, {make_job(1, 4, {1'000'000, 4096}), make_job(2, 2, {300'000})});
  cfg.jobs[1].port_base = 42000;
  cfg.limits.mbufs = 4095;
  const uint64_t before = heap_allocated();
  auto e = engine::Engine::create(cfg);
  ASSERT_TRUE(e.has_value()) << e.error();
  const uint64_t used = heap_allocated() - before;
  // The budget of the engine's own placement (pure: it takes nothing from the heap).
  auto budget = engine::memory_budget(cfg, (*e)->placement(), kPageBytes);
  ASSERT_TRUE(budget.has_value()) << budget.error();
  // The budget counts the copy pool always; the engine makes it only for a port that cannot send chains.
  const bool chains = (*e)->ports()[0]->tx_multi_seg();
  const uint64_t copy_pool = chains ? engine::mbuf_pool_bytes(engine::copy_pool_plan(cfg), kPageBytes) : 0;
  const uint64_t counted = budget->total_bytes() - budget_item(*budget, "EAL") - copy_pool;
  const uint64_t descriptors = budget_item(*budget, "descriptor rings");
  std::printf("engine took %.2f MiB; the budget counts %.2f MiB without the EAL%s (%s)\n", used / 1048576.0,
              counted / 1048576.0, chains ? " and the copy pool, not made" : "", budget->describe().c_str());
  EXPECT_LE(used, counted) << budget->describe();
  EXPECT_GE(static_cast<double>(used), 0.97 * static_cast<double>(counted - descriptors)) << budget->describe();
  // The EAL's own share of its heap, before any test: under the budget's allowance for it.
  std::printf("the EAL and its vdevs held %.2f MiB after start\n", heap_after_eal_bytes() / 1048576.0);
  EXPECT_GT(heap_after_eal_bytes(), 0u);
  EXPECT_LE(heap_after_eal_bytes(), budget_item(*budget, "EAL"));
}

}  // namespace
}  // namespace phub::test

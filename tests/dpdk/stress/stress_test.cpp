// The seeded differential stress test: epochs of random job shapes on a real engine, every result checked
// against the scalar model (driver.hpp), nothing leaked from one epoch to the next. On a wrong answer it
// prints the seed, the epoch, the shape and what went wrong; --seed replays the generator's decisions.
// PHUB_STRESS_VERBOSE=1 prints every epoch's shape and what its schedule did.
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_memzone.h>
#include <rte_mempool.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "epoch.hpp"
#include "failure.hpp"
#include "options.hpp"

namespace phub::stress {
namespace {

// What an epoch must give back: DPDK heap bytes, memzones (rings), mempools and ethdev ports.
struct Resources {
  uint64_t heap_bytes = 0;
  unsigned memzones = 0;
  unsigned mempools = 0;
  uint16_t ports = 0;

  static Resources now() {
    Resources r;
    rte_malloc_socket_stats st{};
    if (rte_malloc_get_socket_stats(0, &st) == 0) r.heap_bytes = st.heap_allocsz_bytes;
    rte_memzone_walk([](const rte_memzone*, void* n) { ++*static_cast<unsigned*>(n); }, &r.memzones);
    rte_mempool_walk([](rte_mempool*, void* n) { ++*static_cast<unsigned*>(n); }, &r.mempools);
    r.ports = rte_eth_dev_count_total();
    return r;
  }
  bool operator==(const Resources&) const = default;
  [[nodiscard]] std::string describe() const {
    return std::to_string(heap_bytes) + " heap bytes, " + std::to_string(memzones) + " memzones, " +
           std::to_string(mempools) + " mempools, " + std::to_string(ports) + " ports";
  }
};

TEST(Stress, EveryResultMatchesTheScalarModel) {
  const Options& o = options();
  std::printf("stress: seed=%" PRIu64 " (replay: --seed %" PRIu64 "), %.0f s%s\n", o.seed, o.seed, o.seconds,
              o.epochs != 0 ? (" or " + std::to_string(o.epochs) + " epochs").c_str() : "");
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const bool verbose = std::getenv("PHUB_STRESS_VERBOSE") != nullptr;
  EpochResult total;
  uint64_t epochs = 0;
  Resources baseline;
  for (uint64_t epoch = 0; (o.epochs == 0 || epoch < o.epochs) && elapsed() < o.seconds; ++epoch) {
    const EpochShape shape = generate_epoch(o.seed, epoch);
    try {
      const double began = elapsed();
      const EpochResult r = run_epoch(o.seed, epoch, shape);
      if (verbose) {
        std::printf("epoch %" PRIu64 " (%.2f s): %s\n  %s\n", epoch, elapsed() - began, shape.describe().c_str(),
                    r.events.c_str());
      }
      total.jobs += r.jobs;
      total.chunk_rounds += r.chunk_rounds;
      total.results_checked += r.results_checked;
      total.elements_checked += r.elements_checked;
      total.advances_deferred += r.advances_deferred;
    } catch (const Failure& f) {
      std::printf("stress: WRONG at seed=%" PRIu64 " epoch=%" PRIu64 " (replay: --seed %" PRIu64 " --epochs %" PRIu64
                  ")\n  epoch shape: %s\n  %s\n",
                  o.seed, epoch, o.seed, epoch + 1, shape.describe().c_str(), f.what());
      std::printf("stress: seed=%" PRIu64 " epochs=%" PRIu64 " wrong=1 in %.1fs\n", o.seed, epoch + 1, elapsed());
      FAIL() << "seed " << o.seed << " epoch " << epoch << ": " << f.what();
    }
    ++epochs;
    // The first epoch leaves what DPDK keeps once made (ethdev data, ...); after that nothing may grow.
    const Resources now = Resources::now();
    if (epoch == 0) baseline = now;
    ASSERT_EQ(now, baseline) << "epoch " << epoch << " leaked: " << now.describe() << ", after epoch 0 "
                             << baseline.describe() << " (seed " << o.seed << ")";
  }
  // deferred: round advances the engine put off because the previous result was still being sent and no
  // spare buffer was free (it never overwrites a buffer a transmit points at).
  std::printf("stress: seed=%" PRIu64 " epochs=%" PRIu64 " jobs=%" PRIu64 " rounds=%" PRIu64 " results_checked=%" PRIu64
              " elements_checked=%" PRIu64 " deferred=%" PRIu64 " wrong=0 in %.1fs\n",
              o.seed, epochs, total.jobs, total.chunk_rounds, total.results_checked, total.elements_checked,
              total.advances_deferred, elapsed());
}

}  // namespace
}  // namespace phub::stress

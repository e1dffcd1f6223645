// A job in the data plane: its immutable plan (in the snapshot) and the part each lcore owns.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/config/config.hpp"
#include "phub/engine/chunk.hpp"
#include "phub/engine/counters.hpp"
#include "phub/engine/memory.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/layout.hpp"

namespace phub::engine {

// Everything about a job that never changes while it runs.
struct JobPlan {
  config::Job cfg;
  uint32_t index = 0;          // position in the snapshot's job table
  proto::Layout layout;
  JobMath math;
  proto::AuthKey key;
  bool authenticated = false;  // the job has a secret: every packet must carry its tag
  uint16_t lcores = 1;         // lcores of this server
  uint16_t first_owner = 0;    // layout owner of this server's lcore 0 (sharded jobs: shard_index * lcores)
  uint64_t rate_per_lcore_pps = 0;
  JobMemory memory;            // the admission estimate
};

// Builds the plan of `job` for `lcores` lcores (times the job's shards: the layout's owners) and an IP MTU of
// `mtu`, without allocating data-plane memory.
[[nodiscard]] Expected<JobPlan, std::string> plan_job(const config::Job& job, uint16_t lcores, uint16_t mtu,
                                                      const agg::Kernels& kernels);

// Where a rank's packets come from: results and errors go back there.
struct Peer {
  proto::MacAddr mac{};
  uint32_t ip = 0;        // host order
  uint16_t udp_port = 0;
  uint8_t port = 0;       // index of the server port it arrived on
  bool known = false;
  uint32_t incarnation = 0;  // the worker process that joined this epoch as this rank (0: none yet)
  // The Ethernet/IPv4/UDP headers of the last message sent to this peer, reused while the snapshot and
  // the UDP payload length stay the same (every full-size result of a job has the same length).
  uint64_t l234_generation = 0;  // Snapshot::generation it was written from (0: nothing cached)
  uint16_t l234_udp_payload = 0;
  std::array<std::byte, proto::kEthBytes + proto::kIpv4Bytes + proto::kUdpBytes> l234;
};

// One result buffer: a DPDK external buffer with a reference count. The chunk holds one reference; every
// mbuf attached to it holds one more, so "busy" means a transmit still points at it.
struct ResultBuf {
  rte_mbuf_ext_shared_info shinfo;
  rte_iova_t data_iova;
  std::byte* data;
  rte_ring* home;  // spares ring of the owning LcoreJob: where the buffer goes when its last user frees it
};

// The chunks (and their memory) that one lcore owns for one job. Created by the control thread on the
// lcore's NUMA socket before the lcore can see it; afterwards only that lcore touches it.
class LcoreJob {
 public:
  [[nodiscard]] static Expected<std::unique_ptr<LcoreJob>, std::string> create(const JobPlan& plan, uint16_t lcore,
                                                                               int socket);
  ~LcoreJob();
  LcoreJob(const LcoreJob&) = delete;
  LcoreJob& operator=(const LcoreJob&) = delete;

  [[nodiscard]] Chunk& chunk(uint32_t local_index) noexcept { return chunks_[local_index]; }
  [[nodiscard]] uint32_t chunk_count() const noexcept { return chunk_count_; }
  [[nodiscard]] Peer& peer(uint16_t rank) noexcept { return peers_[rank]; }

  // The result buffer behind out[i] of a chunk.
  [[nodiscard]] static ResultBuf* buf(const Chunk& c, int i) noexcept { return static_cast<ResultBuf*>(c.out_handle[i]); }
  [[nodiscard]] static bool busy(const ResultBuf* b) noexcept {
    return rte_mbuf_ext_refcnt_read(&b->shinfo) > 1;
  }
  // Before overwriting out[cur ^ 1] in a new round: if a transmit still references it, swap in a spare
  // and let the last mbuf return the old one to the pool. False if no spare was left (the old buffer is
  // then reused: only stale resends could see the new data).
  bool renew_previous(Chunk& c) noexcept;

  // Token bucket of the job's rate limit, this lcore's share. True if the packet may pass.
  bool admit_packet(uint64_t now_tsc, uint64_t tsc_hz) noexcept;

  // Every rank's address and incarnation become unknown (a new epoch: the restarted workers join).
  void forget_peers() noexcept;

  JobCounters counters;
  uint16_t epoch = 0;            // the job's epoch on this lcore (see docs/protocol.md, "Epochs")
  uint32_t stall_cursor = 0;
  uint64_t allocated_bytes = 0;  // what create() took from the DPDK heap and mempools

 private:
  LcoreJob() = default;
  void attach(Chunk& c, int i, ResultBuf* b) noexcept;

  const JobPlan* plan_ = nullptr;
  Chunk* chunks_ = nullptr;
  uint32_t chunk_count_ = 0;
  Peer* peers_ = nullptr;
  std::byte* arena_ = nullptr;
  std::byte* result_block_ = nullptr;
  rte_ring* spares_ = nullptr;
  double tokens_ = 0;
  uint64_t tokens_tsc_ = 0;
};

}  // namespace phub::engine

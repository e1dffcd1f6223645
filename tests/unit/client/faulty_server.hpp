// A deliberately faulty phub server on loopback, for the client tests that need a peer the real server
// cannot be made into: it drops, duplicates or holds back packets, signs with a wrong key, answers every
// push with an error opcode, or stays silent. Underneath it sums the pushes of every rank per (chunk,
// segment, round) so that the client's recovery can be checked end to end. The normal path (allreduce,
// push/pull, ps step, async, the server's own errors) is tested against the real phub-server in
// tests/system/client, never against this.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "phub/client.h"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/layout.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::client::test {

struct FaultyServerOptions {
  uint16_t lcores = 2;
  uint16_t workers = 2;
  uint32_t job_id = 7;
  std::string secret;
  std::vector<uint64_t> keys;
  uint32_t chunk_bytes = 32768;
  bool mean = false;
  // Misbehaviour.
  uint32_t drop_every = 0;                  // drop every n-th packet received (0: none)
  bool duplicate_results = false;           // send every result twice
  std::optional<proto::Status> error_status;  // answer every push with this error instead
  uint32_t error_aux = 0;
  // Besides answering, send an epoch_mismatch naming this epoch (aux: this + 1) for every push: a genuine
  // error recorded in another epoch and replayed, which the client must set aside as stale.
  std::optional<uint16_t> replayed_epoch_error;
  bool wrong_tag = false;                   // sign with another key
  bool mute = false;                        // never answer
  bool flag_mean = false;                   // set the mean flag on results regardless of `mean`
  uint32_t hold_every = 0;                  // hold back every n-th result (0: none) ...
  uint32_t hold_ms = 5;                     // ... for this long, so that later results overtake it
  // Epochs as on the real server (the resume tests): the first incarnation to join holds a rank, a join with
  // incarnation 0 claims nothing, rank 0's epoch_start for the next epoch restarts at round 0, and packets
  // of another epoch get epoch_mismatch. Off: one epoch (0), every joiner told it holds its rank.
  bool epochs = false;
  // Joins as on the real server: a first join gets a challenge and claims nothing; a join that confirms the
  // rank's last challenge (or the nonces of its session: a resend) claims it.
  // Sessions (protocol v3, needs a secret): a holder's confirm makes a session per (lcore, rank), derived as
  // the real server does; every later packet both ways is a session packet. A new confirm's session replaces
  // the old at once, unless switch_on_first_packet: then it is pending until the first packet that opens
  // under it, and answers go under the old one until then (harsher than the real server, which switches at
  // the confirm: what a client sees there when answers overtake each other). With payload_mac, results and
  // pushes carry payload MACs.
  bool sessions = false;
  bool switch_on_first_packet = false;
  bool payload_mac = false;
  bool duplicate_errors = false;            // send every error twice (under a session: a byte-for-byte replay)
  bool stall_errors = false;                // answer every first push also with a (harmless) round_stalled
  // After every result, send the first result and the first error sent to that rank again, byte for byte:
  // a genuine packet recorded and replayed rounds later.
  bool replay_first = false;
  // With every push, also a draining error for its chunk and round from someone without the session keys:
  // tagged under the job key, and sealed under keys of another server nonce. Either would fail the op.
  bool forge_errors = false;
  uint32_t corrupt_every = 0;               // alter the payload of every n-th result after sealing (0: none)
  bool corrupt_keeps_crc = false;           // ... in 5 bytes chosen so that its CRC32C stays the same (an
                                            // attacker who knows CRCs are linear)
  bool unprotected_results = false;         // send results without the crc flag (no checksum)
  uint32_t silent_after_results = 0;        // once this many results went out, act on nothing but joins ...
  uint32_t silent_ms = 300;                 // ... for this long (the clients join again after silence)
  // The chunk-to-interface map: the last lcore also listens on 127.0.0.2 (kInterfaceIpv4) and names that
  // address in every joined answer.
  bool interface_map = false;
};

inline constexpr uint32_t kInterfaceIpv4 = 0x7F000002;  // 127.0.0.2

class FaultyServer {
 public:
  explicit FaultyServer(FaultyServerOptions o);
  ~FaultyServer();
  FaultyServer(const FaultyServer&) = delete;
  FaultyServer& operator=(const FaultyServer&) = delete;

  [[nodiscard]] uint16_t port_base() const noexcept { return port_base_; }
  // A client's config for rank `rank` of this server's job (allreduce, fast timers, 5 s deadline); its
  // strings live as long as the server.
  [[nodiscard]] phub_config client_config(uint16_t rank) const;
  [[nodiscard]] uint64_t pushes() const noexcept { return pushes_.load(); }
  [[nodiscard]] uint64_t first_pushes() const noexcept { return first_pushes_.load(); }  // without the retransmit flag
  [[nodiscard]] uint64_t retransmit_flags() const noexcept { return retransmit_flags_.load(); }
  [[nodiscard]] uint64_t rerequests() const noexcept { return rerequests_.load(); }
  [[nodiscard]] uint64_t leaves() const noexcept { return leaves_.load(); }
  // With interface_map: the last lcore's pushes that came to 127.0.0.2, and to 127.0.0.1.
  [[nodiscard]] uint64_t pushes_at_interface() const noexcept { return pushes_at_interface_.load(); }
  [[nodiscard]] uint64_t pushes_off_interface() const noexcept { return pushes_off_interface_.load(); }
  // With `epochs`: what a restart from a checkpoint does: the job goes to `epoch`, every segment to
  // `first_round` with the previous round's result kept (zeros here) and no contribution, and every rank is
  // free; `rank0` (nonzero) is held by another run's rank 0 at once. Applied by the server's thread before
  // the next packet it handles.
  void restore(uint16_t epoch, uint32_t first_round, uint32_t rank0 = 0);
  // The incarnation holding a rank in the current epoch (0: none); read after the clients are done.
  [[nodiscard]] uint32_t holder(uint16_t rank) const noexcept { return holder_seen_[rank].load(); }
  [[nodiscard]] uint64_t errors_sent() const noexcept { return errors_sent_.load(); }  // genuine, replays not counted
  [[nodiscard]] uint64_t results_corrupted() const noexcept { return corrupted_.load(); }
  [[nodiscard]] uint64_t sessions_made() const noexcept { return sessions_made_.load(); }
  [[nodiscard]] uint64_t session_drops() const noexcept { return session_drops_.load(); }  // refused by open
  // Answers sealed under a rank's old session while a later join's session was pending (switch_on_first_packet).
  [[nodiscard]] uint64_t sealed_while_pending() const noexcept { return sealed_while_pending_.load(); }

 private:
  void alter_keeping_crc(std::span<std::byte> payload);
  struct Segment {
    uint32_t round = 0;
    uint64_t contributed = 0;  // bit per rank
    std::vector<float> acc;
    std::vector<float> prev;   // result of round - 1
    bool has_prev = false;
  };

  // A rank's session with one lcore (sessions).
  struct Session {
    bool active = false;
    proto::SessionKeys keys{};
    proto::SessionNonce worker_nonce{};
    proto::SessionNonce server_nonce{};
    proto::ReplyAddress reply{};
    proto::ReplayWindow rx;
    uint64_t next_tx_seq = 1;
  };

  void loop();
  [[nodiscard]] uint16_t owner_of_fd(int fd) const;
  // Whether a join confirms the challenge last sent for (lcore, rank), or the nonces of its session.
  [[nodiscard]] bool confirms(uint16_t owner, const proto::Header& h, const proto::JoinPayload& jp) const;
  // Joins of v3: the payload checked (handshake key with a secret), the answer carries the joined payload:
  // a fresh challenge, or (`confirmed`) the confirm's own.
  void answer_join(int fd, const proto::Header& h, const proto::JoinPayload& jp, const sockaddr_in& from,
                   proto::Header a, bool confirmed);
  // Sends datagram bytes as they are, with the misbehaviour options that apply to them.
  void emit(int fd, const sockaddr_in& to, proto::Opcode op, uint16_t rank, std::vector<std::byte> out);
  void handle(int fd, uint16_t owner, const std::byte* data, size_t len, const sockaddr_in& from);
  void send(int fd, const sockaddr_in& to, proto::Header h, const std::vector<float>* payload, uint32_t off, uint32_t n);
  void release_held(bool all);
  void send_result(int fd, uint16_t rank, uint32_t chunk, uint32_t round, uint32_t seg, const std::vector<float>& r);
  // Joins with `epochs`; false when the packet belongs to another epoch (answered epoch_mismatch).
  void join(int fd, const proto::Header& h, const proto::JoinPayload& jp, const sockaddr_in& from);
  [[nodiscard]] bool in_epoch(int fd, const proto::Header& h, const sockaddr_in& from);
  void start_epoch(uint16_t epoch, uint32_t first_round);

  FaultyServerOptions o_;
  proto::Layout layout_;
  proto::AuthKey key_{};
  uint16_t port_base_ = 0;
  std::vector<int> fds_;
  std::map<std::pair<uint32_t, uint32_t>, Segment> segs_;  // (chunk, segment)
  std::vector<sockaddr_in> peers_;
  std::vector<bool> peer_known_;
  uint64_t received_ = 0;
  uint32_t seq_ = 0;
  struct Held {
    int fd;
    sockaddr_in to;
    std::vector<std::byte> bytes;
    std::chrono::steady_clock::time_point due;
  };
  std::vector<Held> held_;
  uint64_t results_ = 0;
  std::atomic<uint64_t> pushes_{0}, first_pushes_{0}, retransmit_flags_{0}, rerequests_{0}, leaves_{0};
  std::atomic<uint64_t> pushes_at_interface_{0}, pushes_off_interface_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  uint32_t rank0_incarnation_ = 0;  // the join of rank 0, named in every join answer
  uint16_t epoch_ = 0;
  uint32_t first_round_ = 0;
  std::vector<uint32_t> holders_;   // per rank, with `epochs`
  std::unique_ptr<std::atomic<uint32_t>[]> holder_seen_;
  std::mutex restore_mu_;
  struct Restore {
    uint16_t epoch;
    uint32_t first_round;
    uint32_t rank0;
  };
  std::optional<Restore> restore_;
  proto::AuthKey true_key_{};                      // the job key (key_ may be a wrong one)
  std::vector<std::vector<Session>> sessions_;     // [lcore][rank]
  std::vector<std::vector<Session>> pending_;      // [lcore][rank]: switch_on_first_packet
  struct Challenge {
    bool active = false;
    proto::SessionNonce worker_nonce{};
    proto::SessionNonce server_nonce{};
    uint16_t epoch = 0;
  };
  std::vector<std::vector<Challenge>> challenges_;  // [lcore][rank]: the last challenge sent
  std::map<std::pair<int, uint16_t>, std::vector<std::byte>> first_result_, first_error_;  // (fd, rank): replay_first
  uint64_t results_sent_ = 0;
  uint64_t results_counted_ = 0;  // silent_after_results
  std::chrono::steady_clock::time_point silent_until_{};
  std::atomic<uint64_t> errors_sent_{0}, corrupted_{0}, sessions_made_{0}, session_drops_{0}, sealed_while_pending_{0};
};

}  // namespace phub::client::test

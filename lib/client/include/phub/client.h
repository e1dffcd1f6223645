/* phub/client.h: the stable C API of libphub-client, the kernel-UDP worker library of phub. */
#ifndef PHUB_CLIENT_H
#define PHUB_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PHUB_CLIENT_API_VERSION 1

/* Every call returns one of these codes; phub_last_error() then holds a message for this thread. */
typedef enum phub_status {
  PHUB_OK = 0,
  PHUB_ERR_INVALID_ARGUMENT = 1, /* a bad argument or configuration value (the message names it) */
  PHUB_ERR_STATE = 2,            /* call not allowed now (e.g. register after the first operation) */
  PHUB_ERR_SYSTEM = 3,           /* a socket call failed (the message has errno's text) */
  PHUB_ERR_UNREACHABLE = 4,      /* no answer at all from the server before the deadline (down, wrong
                                    address, or auth refused: the server drops bad tags silently) */
  PHUB_ERR_TIMEOUT = 5,          /* the server answered, but the operation missed its deadline */
  PHUB_ERR_ROUND_STALLED = 6,    /* the server reported the round stalled: another rank is missing */
  PHUB_ERR_ROUND_MISMATCH = 7,   /* the server is on another round (state of an earlier run, or the
                                    workers' operation sequences differ) */
  PHUB_ERR_CHUNK_MAP = 8,        /* the server's chunk map differs (keys, chunk_bytes, mtu, lcores) */
  PHUB_ERR_CONFIG_MISMATCH = 9,  /* the server's job differs in mode, dtype or reduction */
  PHUB_ERR_NOT_INITIALIZED = 10, /* ps mode: rank 0 has not sent the initial weights */
  PHUB_ERR_PROTOCOL = 11,        /* the server rejected a request (bad_request) for another reason */
  PHUB_ERR_NO_MEMORY = 12,
  PHUB_ERR_AUTH = 13,            /* answers with a wrong auth tag arrived: the secrets differ */
  PHUB_ERR_BROKEN = 14,          /* an earlier failure left rounds out of step: reconnect */
  PHUB_ERR_EPOCH = 15,           /* the job was restarted (a new run's rank 0 connected, or the operator
                                    reset it), or another process still holds this rank in its epoch */
  PHUB_ERR_DRAINED = 16,         /* the server starts no new round of the job: drained by the operator,
                                    or removed by a reload */
  PHUB_ERR_RESUMED = 17,         /* ps: the server restarted and restored the job from a checkpoint; this
                                    operation is void. phub_start_round gives the round to repeat the
                                    steps from, phub_pull the restored weights (docs/client.md) */
  PHUB_ERR_HPARAMS = 18,         /* ps: the server refused the step's hyperparameter set: the ranks sent
                                    different sets for the round, or the set is for another optimizer than
                                    the job's (the message names it) */
  PHUB_ERR_NONFINITE = 19        /* the server refused a push with NaN or Inf that the step did not declare
                                    (the job's nonfinite = "refuse"; declare it: PHUB_STEP_NONFINITE) */
} phub_status;

/* The *_ENUM_MAX_ entries make every int a valid value of the type, so that the library can check (and
 * refuse) any value a caller passes without undefined behaviour. */
typedef enum phub_mode { PHUB_MODE_ALLREDUCE = 0, PHUB_MODE_PS = 1, PHUB_MODE_ENUM_MAX_ = 0x7fffffff } phub_mode;
typedef enum phub_dtype { PHUB_FP32 = 0, PHUB_FP16 = 1, PHUB_BF16 = 2, PHUB_DTYPE_ENUM_MAX_ = 0x7fffffff } phub_dtype;
typedef enum phub_reduce { PHUB_REDUCE_SUM = 0, PHUB_REDUCE_MEAN = 1, PHUB_REDUCE_ENUM_MAX_ = 0x7fffffff } phub_reduce;

/* Flags of phub_config.flags. */
#define PHUB_FLAG_NO_GSO 0x1u /* never use UDP GSO (UDP_SEGMENT) on send */
#define PHUB_FLAG_NO_GRO 0x2u /* never ask for UDP GRO on receive */
#define PHUB_FLAG_CRC 0x4u    /* put the payload's CRC32C in pushes (the server then checks it) */
#define PHUB_FLAG_JOIN_CURRENT 0x8u /* rank 0: join the job's current epoch instead of restarting the job */
#define PHUB_FLAG_FRESH_WEIGHTS 0x10u /* rank 0 of a ps job: the restart also forgets the weights (init again) */
#define PHUB_FLAG_ONE_ADDRESS 0x20u /* send every chunk to the server address given, even where the job's chunk
                                       map names another interface of the server (a host that reaches one of
                                       its addresses only; the server then hands frames between its lcores) */

/* Connection settings. Fill with phub_config_init() first: it sets struct_size and the defaults. They must
 * match the job in the server's config (docs/client.md lists which fields correspond to which). */
typedef struct phub_config {
  uint32_t struct_size;       /* sizeof(phub_config), set by phub_config_init */
  const char* servers;        /* IPv4 address(es), comma-separated for a sharded job; a rack hub is just
                                 its address */
  uint16_t port_base;         /* the job's port_base */
  uint16_t server_lcores;     /* worker lcores of each server (default 1) */
  uint32_t job_id;
  uint16_t rank;
  uint16_t workers;
  const char* secret;         /* the job's secret; NULL or "" for none */
  uint32_t chunk_bytes;       /* the job's chunk_bytes (default 32768) */
  uint16_t mtu;               /* IP MTU of the path (default 1500) */
  phub_mode mode;
  phub_dtype dtype;
  phub_reduce reduce;         /* allreduce mode */
  uint32_t round_modulus;     /* the job's round_modulus (0: none) */
  uint32_t timeout_ms;        /* deadline of every blocking operation (default 10000) */
  uint32_t rto_initial_us;    /* first retransmit timeout before RTT samples (default 200000) */
  uint32_t rto_min_us;        /* floor of the adaptive timeout (default 10000) */
  uint32_t rto_max_us;        /* cap of the exponential backoff (default 1000000) */
  uint32_t window_packets;    /* most packets in flight (default 512); adapts between 8 and this */
  const char* bind_address;   /* local IPv4 to bind, NULL for any */
  uint16_t bind_port;         /* local UDP port, 0 for any */
  uint32_t flags;             /* PHUB_FLAG_* */
  uint32_t socket_buffer_bytes; /* SO_RCVBUF/SO_SNDBUF (default 4 MiB) */
  /* Fault injection for tests, in parts per million of packets: dropped before sending, dropped on
   * receipt, sent twice, held back behind the next batch. fault_seed seeds the generator. */
  uint32_t fault_drop_tx_ppm;
  uint32_t fault_drop_rx_ppm;
  uint32_t fault_dup_tx_ppm;
  uint32_t fault_reorder_tx_ppm;
  uint64_t fault_seed;
  uint32_t delay_target_us;   /* queueing delay the window aims at (default 2000); 0: loss-based only */
  uint32_t run_token;         /* optional, the same nonzero value in every rank of one run (e.g. drawn by
                                 rank 0 and broadcast): the other ranks then join only the job epoch that
                                 this run's rank 0 started, never one of an earlier run (0: not used) */
} phub_config;

/* Counters of one client since phub_connect. */
typedef struct phub_stats {
  uint64_t packets_sent;       /* datagrams handed to the kernel (GSO segments counted one by one) */
  uint64_t packets_received;   /* datagrams received (GRO segments counted one by one) */
  uint64_t payload_bytes_sent; /* element bytes pushed (retransmits included) */
  uint64_t payload_bytes_received; /* element bytes of accepted results */
  uint64_t retransmits;        /* packets sent again after a timeout */
  uint64_t rerequests;         /* rerequest packets sent */
  uint64_t duplicates;         /* results dropped as already received */
  uint64_t stale;              /* results or errors for another round or operation, dropped */
  uint64_t bad_tag;            /* packets with a wrong auth tag, dropped */
  uint64_t malformed;          /* packets that failed to parse or came from elsewhere, dropped */
  uint64_t errors_received;    /* error packets from the server */
  uint64_t stalls_reported;    /* round_stalled errors among them */
  uint64_t timeouts;           /* retransmit timer expiries */
  uint64_t fast_retransmits;   /* early retransmits: results arrived past a missing segment */
  uint64_t ops_completed;
  uint64_t send_batches;       /* sendmmsg calls */
  uint64_t recv_batches;       /* recvmmsg calls that returned data */
  uint64_t gro_coalesced;      /* datagrams that arrived merged by UDP GRO */
  uint32_t window_packets;     /* current window */
  uint32_t srtt_us;            /* smoothed completion time of a chunk */
  uint32_t rto_us;             /* current retransmit timeout */
  uint8_t gso;                 /* UDP GSO in use */
  uint8_t gro;                 /* UDP GRO in use */
  uint32_t reorder_window_us;  /* how late an answer may be before it counts as lost */
  uint64_t needless_resends;   /* early retransmits that proved needless (their round answered twice) */
  uint32_t epoch;              /* the job epoch joined (on the first server lcore) */
  uint32_t resumes;            /* ps: times the job resumed from a server's checkpoint (PHUB_ERR_RESUMED) */
  uint32_t rejoins;            /* joins sent again after two timeouts without any answer from a server lcore:
                                  they move the server's answers to this client's address if it changed (NAT) */
  /* Jobs with sessions (docs/protocol.md, "Sessions"): packets of a session refused, besides bad_tag (a
     tag that is not the session's, or a joined that does not answer this client's join). */
  uint64_t replayed;           /* a sequence number already taken, or behind the window: a replay, dropped */
  uint64_t bad_mac;            /* an authentic header whose payload MAC is wrong or missing: altered, dropped */
  uint32_t sessions;           /* sessions established (one per server lcore and join that asked for one) */
  uint64_t bad_checksum;       /* packets whose payload CRC32C is wrong (results, as every result carries one),
                                  and results with neither a checksum nor a MAC: changed on the way back (a
                                  faulty link or an attacker), dropped; the segment is asked for again */
  uint32_t interface_moves;    /* server lcores whose chunks this client sends to another address than the one
                                  it joined, as the job's chunk-to-interface map said (docs/client.md) */
} phub_stats;

typedef struct phub_client phub_client;
typedef struct phub_request phub_request;

/* Defaults (see the field comments); servers, port_base, job_id, rank and workers must then be set. */
void phub_config_init(phub_config* cfg);

/* The message of the last failing call on this thread ("" if none). Valid until the next call. */
const char* phub_last_error(void);
const char* phub_status_name(int status);

/* Open the socket and join the job on every server lcore: rank 0 restarts the job in a new epoch (unless
 * PHUB_FLAG_JOIN_CURRENT), the other ranks join it (docs/protocol.md, "Epochs"). No answer is awaited here:
 * the first operation waits for the join, within its deadline. */
int phub_connect(const phub_config* cfg, phub_client** out);
/* Send leave to every server lcore and free the client. Pending requests are abandoned. NULL is fine. */
int phub_close(phub_client* c);

/* Declare key number `key` (0, 1, 2, ... in the order of the job's keys in the server config) with its
 * elements; dtype must be the job's. Keys are frozen by the first operation. */
int phub_register(phub_client* c, uint32_t key, uint64_t elems, phub_dtype dtype);

/* Allreduce in place: push buf (elems of the key in the job's dtype), get the sum or mean back into buf. */
int phub_allreduce(phub_client* c, uint32_t key, void* buf);
int phub_allreduce_async(phub_client* c, uint32_t key, void* buf, phub_request** req);

/* Split allreduce: phub_push starts the key's next round from src (which must stay valid until the
 * matching phub_pull returns); phub_pull waits for that round and writes the result into dst.
 * ps mode: phub_pull without a pending push fetches the current weights from the server. */
int phub_push(phub_client* c, uint32_t key, const void* src);
int phub_pull(phub_client* c, uint32_t key, void* dst);

/* ps mode. phub_init: rank 0 sends buf as the initial weights, the other ranks wait until they are set; then
 * every rank receives the server's weights into buf (rank 0's own, or the weights the job kept: a restart
 * that keeps them, a restored checkpoint). phub_step: push grads, receive the updated weights into weights. */
int phub_init(phub_client* c, uint32_t key, void* buf);
int phub_step(phub_client* c, uint32_t key, const void* grads, void* weights);
int phub_step_async(phub_client* c, uint32_t key, const void* grads, void* weights, phub_request** req);

/* ps: the hyperparameters of one parameter group for a step (docs/protocol.md, "Hyperparameters"), the
 * arguments of the torch optimizer the job's optimizer names: PHUB_OPT_SGD (plain, momentum, or Nesterov
 * by its values), PHUB_OPT_ADAM or PHUB_OPT_ADAMW. Fill with phub_hparams_init first. */
#define PHUB_OPT_SGD 0u
#define PHUB_OPT_ADAM 1u
#define PHUB_OPT_ADAMW 2u
typedef struct phub_hparams {
  uint32_t struct_size; /* sizeof(phub_hparams), set by phub_hparams_init */
  uint32_t optimizer;   /* PHUB_OPT_* */
  uint32_t nesterov;    /* SGD: 1 for Nesterov momentum */
  double lr;
  double momentum;      /* SGD */
  double beta1, beta2, eps; /* Adam, AdamW */
  double weight_decay;  /* SGD, Adam: L2 added to the gradient; AdamW: decoupled */
} phub_hparams;
void phub_hparams_init(phub_hparams* h);
/* Registers a set (checked as torch checks its optimizer's arguments) and gives its id for phub_step_ex.
 * The client sends it to each server lcore once, before the first push that names it. */
int phub_register_hparams(phub_client* c, const phub_hparams* h, uint64_t* id);

/* phub_step_async with the step's hyperparameter set (0: the job's configured optimizer) and flags:
 * PHUB_STEP_NONFINITE declares that this rank found NaN or Inf in its gradients; the server then applies no
 * update to any chunk of the round (every rank gets the weights unchanged). Every rank must name the same
 * set for a key in a round; a disagreement fails with PHUB_ERR_HPARAMS. */
#define PHUB_STEP_NONFINITE 0x1u
int phub_step_ex(phub_client* c, uint32_t key, const void* grads, void* weights, uint64_t hparams_id,
                 uint32_t flags, phub_request** req);

/* Drive requests until req completes (or its deadline passes); frees req and returns its status. */
int phub_wait(phub_client* c, phub_request* req);
/* phub_wait, and what the results said: PHUB_RESULT_SKIPPED when a ps step's round was skipped (a rank
 * declared it non-finite; the weights written are the unchanged ones). */
#define PHUB_RESULT_SKIPPED 0x1u
int phub_wait_ex(phub_client* c, phub_request* req, uint32_t* result_flags);

/* ps: the optimizer's state of a key, fp32, as the servers hold it (docs/protocol.md, "Optimizer state"):
 * PHUB_STATE_MASTER the fp32 weights, PHUB_STATE_MOMENT1 the momentum buffer or Adam's exp_avg,
 * PHUB_STATE_MOMENT2 Adam's exp_avg_sq. phub_state_pull reads it and the step count between steps;
 * phub_state_init (rank 0) sets it and the step count on servers that have not trained the job (call it
 * before phub_init, whose weights then keep the moments set). */
#define PHUB_STATE_MASTER 1
#define PHUB_STATE_MOMENT1 2
#define PHUB_STATE_MOMENT2 3
int phub_state_pull(phub_client* c, uint32_t key, int array, float* dst, uint64_t* step);
int phub_state_init(phub_client* c, uint32_t key, int array, const float* src, uint64_t step);
/* Drive requests without blocking; *done = 1 when req has completed (then phub_wait returns at once). */
int phub_test(phub_client* c, phub_request* req, int* done);

/* The job round this client's operations start from, once it has joined the job on every server lcore
 * (waits for that within timeout_ms): 0 when its rank 0 restarted the job, the round after the
 * checkpoint's when the server restored a ps job from a checkpoint. A training loop's first step is that
 * round. After an operation failed with PHUB_ERR_RESUMED (the server restarted mid-run) it returns the round
 * the job resumes at, and ends the resume: until then every operation fails with PHUB_ERR_RESUMED. */
int phub_start_round(phub_client* c, uint32_t* round);

int phub_get_stats(const phub_client* c, phub_stats* out);
/* Freeze the key list and build the chunk map now (the first operation does it implicitly). */
int phub_finalize(phub_client* c, uint32_t* chunks_out);

#ifdef __cplusplus
}
#endif

#endif /* PHUB_CLIENT_H */

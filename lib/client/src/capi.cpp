// The C API (phub/client.h): argument checks, the per-client mutex, thread-local error messages.
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "phub/client.h"
#include "phub/client/client.hpp"

using phub::client::Error;
using phub::client::OpKind;

struct phub_client {
  std::mutex mu;
  std::unique_ptr<phub::client::Client> impl;
};

struct phub_request {
  phub::client::OpId id;
};

namespace {

thread_local std::string g_last_error;

int report(const Error& e) {
  g_last_error = e.message;
  return e.code;
}
int report(phub_status code, const char* message) {
  g_last_error = message;
  return code;
}
// Like errno, the message stays until the next failure.
int ok() { return PHUB_OK; }

// Runs `f` and turns allocation failures (the only exceptions the library can meet) into a code.
template <class F>
int guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return report(PHUB_ERR_NO_MEMORY, "out of memory");
  } catch (...) {
    return report(PHUB_ERR_SYSTEM, "unexpected internal error");
  }
}

phub::client::Result<phub::client::Options> to_options(const phub_config* cfg) {
  using phub::client::fail;
  if (cfg == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "config is NULL");
  if (cfg->struct_size != sizeof(phub_config)) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "config.struct_size is not sizeof(phub_config): call phub_config_init");
  }
  if (cfg->servers == nullptr) return fail(PHUB_ERR_INVALID_ARGUMENT, "config.servers is NULL");
  if (cfg->mode != PHUB_MODE_ALLREDUCE && cfg->mode != PHUB_MODE_PS) return fail(PHUB_ERR_INVALID_ARGUMENT, "config.mode is not a phub_mode");
  if (static_cast<unsigned>(cfg->dtype) > PHUB_BF16) return fail(PHUB_ERR_INVALID_ARGUMENT, "config.dtype is not a phub_dtype");
  if (cfg->reduce != PHUB_REDUCE_SUM && cfg->reduce != PHUB_REDUCE_MEAN) return fail(PHUB_ERR_INVALID_ARGUMENT, "config.reduce is not a phub_reduce");
  if ((cfg->flags & ~(PHUB_FLAG_NO_GSO | PHUB_FLAG_NO_GRO | PHUB_FLAG_CRC | PHUB_FLAG_JOIN_CURRENT |
                      PHUB_FLAG_FRESH_WEIGHTS | PHUB_FLAG_ONE_ADDRESS)) != 0) {
    return fail(PHUB_ERR_INVALID_ARGUMENT, "config.flags has unknown bits");
  }
  phub::client::Options o;
  auto servers = phub::client::parse_servers(cfg->servers);
  if (!servers) return phub::unexpected(std::move(servers).error());
  o.servers = std::move(*servers);
  o.port_base = cfg->port_base;
  o.server_lcores = cfg->server_lcores;
  o.job_id = cfg->job_id;
  o.rank = cfg->rank;
  o.workers = cfg->workers;
  o.secret = cfg->secret != nullptr ? cfg->secret : "";
  o.chunk_bytes = cfg->chunk_bytes;
  o.mtu = cfg->mtu;
  o.mode = cfg->mode == PHUB_MODE_PS ? phub::client::Mode::ps : phub::client::Mode::allreduce;
  o.dtype = static_cast<phub::Dtype>(cfg->dtype);
  o.mean = cfg->reduce == PHUB_REDUCE_MEAN;
  o.round_modulus = cfg->round_modulus;
  o.timeout_ms = cfg->timeout_ms;
  o.rto_initial_us = cfg->rto_initial_us;
  o.rto_min_us = cfg->rto_min_us;
  o.rto_max_us = cfg->rto_max_us;
  o.window_packets = cfg->window_packets;
  o.delay_target_us = cfg->delay_target_us;
  if (cfg->bind_address != nullptr && cfg->bind_address[0] != '\0') {
    auto ip = phub::client::parse_address(cfg->bind_address);
    if (!ip) return fail(PHUB_ERR_INVALID_ARGUMENT, "config.bind_address: " + ip.error().message);
    o.bind_ipv4 = *ip;
  }
  o.bind_port = cfg->bind_port;
  o.gso = (cfg->flags & PHUB_FLAG_NO_GSO) == 0;
  o.gro = (cfg->flags & PHUB_FLAG_NO_GRO) == 0;
  o.crc = (cfg->flags & PHUB_FLAG_CRC) != 0;
  o.restart_job = (cfg->flags & PHUB_FLAG_JOIN_CURRENT) == 0;
  o.fresh_weights = (cfg->flags & PHUB_FLAG_FRESH_WEIGHTS) != 0;
  o.interface_map = (cfg->flags & PHUB_FLAG_ONE_ADDRESS) == 0;
  o.run_token = cfg->run_token;
  o.socket_buffer_bytes = cfg->socket_buffer_bytes;
  o.faults = {cfg->fault_drop_tx_ppm, cfg->fault_drop_rx_ppm, cfg->fault_dup_tx_ppm, cfg->fault_reorder_tx_ppm,
              cfg->fault_seed};
  return o;
}

// Checks the client handle, locks it and runs f(impl, lock).
template <class F>
int with_client(phub_client* c, F&& f) noexcept {
  if (c == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "client is NULL");
  return guarded([&] {
    std::unique_lock<std::mutex> lock(c->mu);
    return f(*c->impl, lock);
  });
}

int post(phub_client* c, OpKind kind, uint32_t key, const void* src, void* dst, phub_request** req,
         const phub::client::StepSettings& step = {}) {
  if (req == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "request pointer is NULL");
  *req = nullptr;
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>&) {
    auto id = cl.post(kind, key, static_cast<const std::byte*>(src), static_cast<std::byte*>(dst), step);
    if (!id) return report(id.error());
    *req = new phub_request{*id};
    return ok();
  });
}

int run(phub_client* c, OpKind kind, uint32_t key, const void* src, void* dst) {
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>& lock) {
    auto id = cl.post(kind, key, static_cast<const std::byte*>(src), static_cast<std::byte*>(dst));
    if (!id) return report(id.error());
    auto r = cl.wait(*id, &lock);
    return r ? ok() : report(r.error());
  });
}

}  // namespace

extern "C" {

void phub_config_init(phub_config* cfg) {
  if (cfg == nullptr) return;
  std::memset(cfg, 0, sizeof *cfg);
  const phub::client::Options d;
  cfg->struct_size = sizeof *cfg;
  cfg->server_lcores = d.server_lcores;
  cfg->chunk_bytes = d.chunk_bytes;
  cfg->mtu = d.mtu;
  cfg->mode = PHUB_MODE_ALLREDUCE;
  cfg->dtype = PHUB_FP32;
  cfg->reduce = PHUB_REDUCE_SUM;
  cfg->timeout_ms = d.timeout_ms;
  cfg->rto_initial_us = d.rto_initial_us;
  cfg->rto_min_us = d.rto_min_us;
  cfg->rto_max_us = d.rto_max_us;
  cfg->window_packets = d.window_packets;
  cfg->delay_target_us = d.delay_target_us;
  cfg->socket_buffer_bytes = d.socket_buffer_bytes;
}

const char* phub_last_error(void) { return g_last_error.c_str(); }

const char* phub_status_name(int status) {
  switch (status) {
    case PHUB_OK: return "ok";
    case PHUB_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case PHUB_ERR_STATE: return "state";
    case PHUB_ERR_SYSTEM: return "system";
    case PHUB_ERR_UNREACHABLE: return "unreachable";
    case PHUB_ERR_TIMEOUT: return "timeout";
    case PHUB_ERR_ROUND_STALLED: return "round_stalled";
    case PHUB_ERR_ROUND_MISMATCH: return "round_mismatch";
    case PHUB_ERR_CHUNK_MAP: return "chunk_map";
    case PHUB_ERR_CONFIG_MISMATCH: return "config_mismatch";
    case PHUB_ERR_NOT_INITIALIZED: return "not_initialized";
    case PHUB_ERR_PROTOCOL: return "protocol";
    case PHUB_ERR_NO_MEMORY: return "no_memory";
    case PHUB_ERR_AUTH: return "auth";
    case PHUB_ERR_BROKEN: return "broken";
    case PHUB_ERR_EPOCH: return "epoch";
    case PHUB_ERR_DRAINED: return "drained";
    case PHUB_ERR_RESUMED: return "resumed";
    case PHUB_ERR_HPARAMS: return "hparams";
    case PHUB_ERR_NONFINITE: return "nonfinite";
    default: return "unknown";
  }
}

int phub_connect(const phub_config* cfg, phub_client** out) {
  if (out == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  return guarded([&] {
    auto opts = to_options(cfg);
    if (!opts) return report(opts.error());
    auto impl = phub::client::Client::connect(*opts);
    if (!impl) return report(impl.error());
    auto* c = new phub_client();
    c->impl = std::move(*impl);
    *out = c;
    return ok();
  });
}

int phub_close(phub_client* c) {
  if (c == nullptr) return ok();
  return guarded([&] {
    delete c;
    return ok();
  });
}

int phub_register(phub_client* c, uint32_t key, uint64_t elems, phub_dtype dtype) {
  if (static_cast<unsigned>(dtype) > PHUB_BF16) return report(PHUB_ERR_INVALID_ARGUMENT, "dtype is not a phub_dtype");
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>&) {
    auto r = cl.register_key(key, elems, static_cast<phub::Dtype>(dtype));
    return r ? ok() : report(r.error());
  });
}

int phub_finalize(phub_client* c, uint32_t* chunks_out) {
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>&) {
    auto r = cl.finalize();
    if (!r) return report(r.error());
    if (chunks_out != nullptr) *chunks_out = *r;
    return ok();
  });
}

int phub_allreduce(phub_client* c, uint32_t key, void* buf) { return run(c, OpKind::allreduce, key, buf, buf); }

int phub_allreduce_async(phub_client* c, uint32_t key, void* buf, phub_request** req) {
  return post(c, OpKind::allreduce, key, buf, buf, req);
}

int phub_push(phub_client* c, uint32_t key, const void* src) {
  if (src == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>&) {
    auto r = cl.push(key, static_cast<const std::byte*>(src));
    return r ? ok() : report(r.error());
  });
}

int phub_pull(phub_client* c, uint32_t key, void* dst) {
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>& lock) {
    auto r = cl.pull(key, static_cast<std::byte*>(dst), &lock);
    return r ? ok() : report(r.error());
  });
}

int phub_init(phub_client* c, uint32_t key, void* buf) {
  if (c == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "client is NULL");
  // Rank 0 then takes the weights too: the server keeps those it has (a restart that keeps the weights, a
  // restored checkpoint) and answers a late init with them, so every rank starts from the same ones.
  if (c->impl->options().rank == 0) {
    if (const int r = run(c, OpKind::init_send, key, buf, nullptr); r != PHUB_OK) return r;
  }
  return run(c, OpKind::pull, key, nullptr, buf);
}

int phub_step(phub_client* c, uint32_t key, const void* grads, void* weights) {
  return run(c, OpKind::step, key, grads, weights);
}

int phub_step_async(phub_client* c, uint32_t key, const void* grads, void* weights, phub_request** req) {
  return post(c, OpKind::step, key, grads, weights, req);
}

int phub_wait(phub_client* c, phub_request* req) { return phub_wait_ex(c, req, nullptr); }

int phub_wait_ex(phub_client* c, phub_request* req, uint32_t* result_flags) {
  if (req == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "request is NULL");
  const phub::client::OpId id = req->id;
  delete req;
  if (result_flags != nullptr) *result_flags = 0;
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>& lock) {
    bool skipped = false;
    auto r = cl.wait(id, &lock, &skipped);
    if (result_flags != nullptr && skipped) *result_flags |= PHUB_RESULT_SKIPPED;
    return r ? ok() : report(r.error());
  });
}

void phub_hparams_init(phub_hparams* h) {
  if (h == nullptr) return;
  std::memset(h, 0, sizeof *h);
  h->struct_size = sizeof *h;
}

int phub_register_hparams(phub_client* c, const phub_hparams* h, uint64_t* id) {
  if (h == nullptr || id == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "hparams or id is NULL");
  if (h->struct_size != sizeof(phub_hparams)) {
    return report(PHUB_ERR_INVALID_ARGUMENT, "hparams.struct_size is not sizeof(phub_hparams): call phub_hparams_init");
  }
  if (h->optimizer > PHUB_OPT_ADAMW) return report(PHUB_ERR_INVALID_ARGUMENT, "hparams.optimizer is not a PHUB_OPT_*");
  if (h->nesterov > 1) return report(PHUB_ERR_INVALID_ARGUMENT, "hparams.nesterov is not 0 or 1");
  phub::proto::Hparams p;
  p.family = static_cast<phub::proto::HparamsFamily>(h->optimizer);
  p.nesterov = h->nesterov != 0;
  p.lr = h->lr;
  p.momentum = h->momentum;
  p.beta1 = h->beta1;
  p.beta2 = h->beta2;
  p.eps = h->eps;
  p.weight_decay = h->weight_decay;
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>&) {
    auto r = cl.register_hparams(p);
    if (!r) return report(r.error());
    *id = *r;
    return ok();
  });
}

int phub_step_ex(phub_client* c, uint32_t key, const void* grads, void* weights, uint64_t hparams_id, uint32_t flags,
                 phub_request** req) {
  if ((flags & ~PHUB_STEP_NONFINITE) != 0) return report(PHUB_ERR_INVALID_ARGUMENT, "flags has unknown bits");
  return post(c, OpKind::step, key, grads, weights, req,
              phub::client::StepSettings{hparams_id, (flags & PHUB_STEP_NONFINITE) != 0});
}

int phub_state_pull(phub_client* c, uint32_t key, int array, float* dst, uint64_t* step) {
  if (dst == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (array < PHUB_STATE_MASTER || array > PHUB_STATE_MOMENT2) return report(PHUB_ERR_INVALID_ARGUMENT, "array is not a PHUB_STATE_*");
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>& lock) {
    auto r = cl.state_pull(key, static_cast<uint8_t>(array), dst, step, &lock);
    return r ? ok() : report(r.error());
  });
}

int phub_state_init(phub_client* c, uint32_t key, int array, const float* src, uint64_t step) {
  if (src == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (array < PHUB_STATE_MASTER || array > PHUB_STATE_MOMENT2) return report(PHUB_ERR_INVALID_ARGUMENT, "array is not a PHUB_STATE_*");
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>& lock) {
    auto r = cl.state_init(key, static_cast<uint8_t>(array), src, step, &lock);
    return r ? ok() : report(r.error());
  });
}

int phub_test(phub_client* c, phub_request* req, int* done) {
  if (req == nullptr || done == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "request or done is NULL");
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>&) {
    auto r = cl.test(req->id);
    if (!r) return report(r.error());
    *done = *r ? 1 : 0;
    return ok();
  });
}

int phub_start_round(phub_client* c, uint32_t* round) {
  if (round == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "round is NULL");
  return with_client(c, [&](phub::client::Client& cl, std::unique_lock<std::mutex>& lock) {
    auto r = cl.start_round(&lock);
    if (!r) return report(r.error());
    *round = *r;
    return ok();
  });
}

int phub_get_stats(const phub_client* c, phub_stats* out) {
  if (c == nullptr || out == nullptr) return report(PHUB_ERR_INVALID_ARGUMENT, "client or out is NULL");
  auto* mc = const_cast<phub_client*>(c);
  std::lock_guard<std::mutex> lock(mc->mu);
  *out = mc->impl->stats();
  return ok();
}

}  // extern "C"

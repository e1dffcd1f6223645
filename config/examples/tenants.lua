-- tenants.lua: one server shared by several teams' jobs (tenants).
--
-- Each job has its own key space, worker set, UDP port range, secret (each rank's session is keyed by it),
-- memory quota and packet-rate limit, and may only be reached from its own subnet. A helper function
-- gives every tenant a disjoint port range and fills in what all tenants share.

local MiB = 1024 * 1024
local NLCORES = 4

local next_port = 43000
-- tenant{...}: a job with the shared defaults and the next free range of NLCORES ports.
local function tenant(job)
  job.port_base = next_port
  next_port = next_port + 100          -- leave room to grow to 100 lcores without renumbering
  job.chunk_bytes = job.chunk_bytes or "32KiB"
  job.allowed_sources = job.allowed_sources or { job.subnet }
  job.subnet = nil                     -- not a job field: remove before returning
  return job
end

local lcores = {}
for id = 1, NLCORES do lcores[id] = { id = id } end

return {
  -- 4 GiB of hugepages: the jobs' limit below, the mbuf pools and the EAL (`phub-server --check` prints it).
  eal_args = { "-l", "0-4", "-n", "4", "--socket-mem", "4096", "-a", "0000:af:00.0", "--file-prefix", "phub-tenants" },

  ports = {
    { name = "p0", device = "0000:af:00.0", ipv4 = "198.18.30.1/22", mac = "02:70:68:75:62:01", steering = "auto" },
  },
  lcores = lcores,

  jobs = {
    -- Team A: vision model, parameter server with momentum SGD, fp32 pushes.
    tenant {
      id = 1, name = "vision-a", mode = "ps", dtype = "fp32",
      workers = 8, secret = "team-a:3f9c2e71c5d8", quota_bytes = 512 * MiB,
      rate_limit_pps = 2000000, subnet = "198.18.30.0/24",
      keys = { { name = "backbone", elems = 11689512 }, { name = "head", elems = 513000 } },
      optimizer = { kind = "momentum", lr = 0.05, momentum = 0.9, weight_decay = 5e-4 },
    },
    -- Team B: language model, bf16 allreduce, bit-reproducible sums (deterministic mode).
    tenant {
      id = 2, name = "lm-b", mode = "allreduce", reduce = "mean", dtype = "bf16", deterministic = true,
      workers = 4, secret = "team-b:a0d41b9e07f2", quota_bytes = "2GiB", chunk_bytes = "64KiB",
      rate_limit_pps = 4000000, subnet = "198.18.31.0/24",
      keys = { { name = "tok_embeddings", elems = 32000 * 768 }, { name = "layers", elems = 12 * 7079424 } },
    },
    -- Team C: recommendation model with fp16 pushes and Adam; workers pinned by address, one per rank.
    tenant {
      id = 3, name = "recsys-c", mode = "ps", dtype = "fp16",
      workers = { "198.18.32.10", "198.18.32.11", "198.18.32.12" },
      secret = "team-c:77e05a13e94b", quota_bytes = 256 * MiB, rate_limit_pps = 1000000,
      subnet = "198.18.32.0/24", round_modulus = 65536,
      keys = { { name = "dense", elems = 2097152 }, { name = "bias", elems = 1 } },
      optimizer = { kind = "adam", lr = 3e-4, beta1 = 0.9, beta2 = 0.98, eps = 1e-6 },
    },
    -- An open sandbox job: no secret (no authentication, which it must say), any source, small quota.
    tenant {
      id = 4, name = "scratch", mode = "allreduce", reduce = "sum", dtype = "fp32",
      workers = 2, secret = "", insecure = true, quota_bytes = 16 * MiB, rate_limit_pps = 100000,
      allowed_sources = {},
      keys = { { name = "t", elems = 4096 } },
    },
  },

  limits = { memory_bytes = "3GiB", max_jobs = 8 },
  control = { socket_path = "/run/phub/tenants.sock", stats_interval_ms = 2000 },
}

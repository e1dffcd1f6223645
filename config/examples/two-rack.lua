-- two-rack.lua: the config of a rack hub in a two-rack deployment (racks, rack, ranks_by_rack), taking
-- the rack grouping phub-probe planned from racks.lua beside it, unchanged, through include().
--
-- The hub sums its rack's ranks, forwards one partial per chunk to the chunk's home hub and fans the
-- result back to its workers; the job's epochs start at rank 0's hub and reach the other hub, which checks
-- that both hold the same hierarchy (docs/hierarchy.md). Workers point at their own rack's hub as at a
-- flat server. Both hubs load the same file except for `this_rack` (`phub-probe run
-- --hub-config-template` writes one such file per hub).

local plan = include("racks.lua")  -- { racks = {...}, ranks_by_rack = {...} }
local this_rack = "rack1"

local hub_ipv4 = {}
for _, r in ipairs(plan.racks) do hub_ipv4[r.name] = r.hub_ipv4 end

return {
  -- 4 GiB of hugepages: the jobs' limit below, the mbuf pools and the EAL (`phub-server --check` prints it).
  eal_args = "-l 0-4 -n 4 --socket-mem 4096 -a 0000:5e:00.0 --file-prefix phub",

  ports = {
    { name = "uplink", device = "0000:5e:00.0", ipv4 = hub_ipv4[this_rack] .. "/23", mtu = 9000 },
  },

  lcores = { { id = 1 }, { id = 2 }, { id = 3 }, { id = 4 } },  -- no ports list: each polls every port

  racks = plan.racks,
  rack = this_rack,

  jobs = {
    {
      id = 7, name = "bert-large", mode = "allreduce", reduce = "mean", dtype = "bf16",
      workers = 8, port_base = 42000, secret = "bert-large-2rack",
      quota_bytes = "3GiB", chunk_bytes = "64KiB",
      keys = {
        { name = "embeddings", elems = 30522 * 1024 + 512 * 1024 + 2 * 1024 },
        { name = "encoder", elems = 24 * 12596224 },
        { name = "pooler", elems = 1024 * 1024 + 1024 },
      },
      -- Every rank 0..workers-1 appears in exactly one rack.
      ranks_by_rack = plan.ranks_by_rack,
    },
  },

  timeouts = { round_stall_ms = 1000 },
  limits = { memory_bytes = "3GiB" },
}

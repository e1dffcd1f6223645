-- two-rack.lua: the config format of a rack hub in a two-rack deployment (racks, rack, ranks_by_rack),
-- as phub-probe's rack snippet fills it.
--
-- NOT RUNNABLE YET: the engine does the cross-rack aggregation (a hub sums its rack's ranks, forwards one
-- partial per chunk to the chunk's home hub, and fans the result back; docs/hierarchy.md), but workers'
-- joins and job epochs do not cross hubs yet. lib/config loads and validates this file, but
-- phub-server --check and phub-server refuse it with a message that says so, rather than let the
-- workers of the rack without rank 0 wait for its join. Both hubs would load the same file except
-- for `rack`; the rank grouping is what `phub-probe` plans from measured latencies.

local this_rack = "rack-a"

-- ranks(first, last) = { first, first + 1, ..., last }
local function ranks(first, last)
  local r = {}
  for i = first, last do r[#r + 1] = i end
  return r
end

local hub_ipv4 = { ["rack-a"] = "198.18.20.1", ["rack-b"] = "198.18.21.1" }

return {
  eal_args = "-l 0-4 -n 4 --socket-mem 2048 -a 0000:5e:00.0 --file-prefix phub",

  ports = {
    { name = "uplink", device = "0000:5e:00.0", ipv4 = hub_ipv4[this_rack] .. "/23", mtu = 9000 },
  },

  lcores = { { id = 1 }, { id = 2 }, { id = 3 }, { id = 4 } },  -- no ports list: each polls every port

  racks = {
    { name = "rack-a", hub_ipv4 = hub_ipv4["rack-a"],
      hosts = { "vm-a0", "vm-a1", "vm-a2", "vm-a3" } },
    { name = "rack-b", hub_ipv4 = hub_ipv4["rack-b"], hub_port_base = 0,  -- 0: same UDP ports as the job
      hosts = { "vm-b0", "vm-b1", "vm-b2", "vm-b3" } },
  },
  rack = this_rack,

  jobs = {
    {
      id = 7, name = "bert-large", mode = "allreduce", reduce = "mean", dtype = "bf16",
      workers = 8, port_base = 42000, secret = "bert-large-2rack",
      quota_bytes = "4GiB", chunk_bytes = "64KiB",
      keys = {
        { name = "embeddings", elems = 30522 * 1024 + 512 * 1024 + 2 * 1024 },
        { name = "encoder", elems = 24 * 12596224 },
        { name = "pooler", elems = 1024 * 1024 + 1024 },
      },
      -- Every rank 0..workers-1 appears in exactly one rack.
      ranks_by_rack = { ["rack-a"] = ranks(0, 3), ["rack-b"] = ranks(4, 7) },
    },
  },

  timeouts = { round_stall_ms = 1000 },
  limits = { memory_bytes = "8GiB" },
}

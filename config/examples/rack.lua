-- rack.lua: one rack's parameter-server appliance on real NICs.
--
-- A dual-socket server with two 100 GbE ports bound to vfio-pci, 1 GiB hugepages reserved on socket 0
-- (the NICs' socket), and eight busy-polling worker lcores on socket 0's cores 2..9. Lcore 0 (core 0)
-- is the control thread. The 16 training workers of the rack reach the server on two subnets.

local GiB = 1024 * 1024 * 1024

-- Parameter tensors of a ResNet-50, grouped by stage: {name, elements}. Built with a loop to show
-- that a config is a program; the server sees only the resulting list.
local function resnet50_keys()
  local keys = { { name = "conv1.weight", elems = 64 * 3 * 7 * 7 } }
  local stages = { { 64, 256, 3 }, { 128, 512, 4 }, { 256, 1024, 6 }, { 512, 2048, 3 } }
  local in_ch = 64
  for s, st in ipairs(stages) do
    local mid, out, blocks = st[1], st[2], st[3]
    for b = 1, blocks do
      local p = string.format("layer%d.%d.", s, b - 1)
      keys[#keys + 1] = { name = p .. "conv1.weight", elems = in_ch * mid }
      keys[#keys + 1] = { name = p .. "conv2.weight", elems = mid * mid * 9 }
      keys[#keys + 1] = { name = p .. "conv3.weight", elems = mid * out }
      if b == 1 then keys[#keys + 1] = { name = p .. "downsample.weight", elems = in_ch * out } end
      in_ch = out
    end
  end
  keys[#keys + 1] = { name = "fc.weight", elems = 2048 * 1000 }
  keys[#keys + 1] = { name = "fc.bias", elems = 1000 }
  return keys
end

-- Eight worker lcores on cores 2..9, each polling both ports (one queue pair per port).
local lcores, lcore_map = {}, { "0@0" }
for id = 1, 8 do
  lcores[id] = { id = id, ports = { "nic0", "nic1" } }
  lcore_map[#lcore_map + 1] = string.format("%d@%d", id, id + 1)  -- lcore id runs on core id + 1
end

return {
  eal_args = {
    "--lcores", table.concat(lcore_map, ","),    -- 0@0,1@2,2@3,...,8@9
    "-n", "4",
    "--socket-mem", "4096,0",                     -- hugepage memory on socket 0 only
    "--huge-dir", "/dev/hugepages1G",
    "-a", "0000:3b:00.0", "-a", "0000:3b:00.1",   -- only these two NICs
    "--file-prefix", "phub",
  },

  ports = {
    { name = "nic0", device = "0000:3b:00.0", ipv4 = "198.18.10.1/24", mtu = 9000,
      rx_desc = 4096, tx_desc = 4096, steering = "flow" },  -- the NIC must accept rte_flow rules
    { name = "nic1", device = "0000:3b:00.1", ipv4 = "198.18.11.1/24", mtu = 9000,
      rx_desc = 4096, tx_desc = 4096, steering = "flow" },
  },

  lcores = lcores,

  -- A dedicated appliance: never sleep.
  polling = { idle_polls_before_sleep = 0, idle_sleep_us = 0 },

  jobs = {
    {
      id = 100,
      name = "resnet50",
      mode = "ps",
      dtype = "fp16",             -- workers push fp16 gradients; the server keeps fp32 weights
      workers = 16,
      port_base = 41000,          -- lcores 1..8 listen on 41000..41007
      secret = "f6a1c0d4-resnet50-rack1",
      quota_bytes = 1 * GiB,
      chunk_bytes = "32KiB",      -- PHub's chunk size: fits in L1/L2 while being summed
      keys = resnet50_keys(),
      optimizer = { kind = "nesterov", lr = 0.1, momentum = 0.9, weight_decay = 1e-4 },
      allowed_sources = { "198.18.10.0/24", "198.18.11.0/24" },
    },
  },

  timeouts = { round_stall_ms = 500, drain_ms = 5000 },

  limits = {
    -- Within --socket-mem 4096 with the pools below: `phub-server --check` prints the budget (2.4 GiB
    -- with this job), and a job added by reload is admitted up to this limit.
    memory_bytes = "1536MiB",
    max_jobs = 16,
    -- Per pool, in hugepages: 8 RX queues x 4096 descriptors hold 32768 mbufs, as many again in flight.
    -- Three pools of 10.4 KiB mbufs at MTU 9000 (one RX pool per port and the copy pool): 2 GiB.
    mbufs = 65535,
    ring_entries = 8192,
  },

  control = { socket_path = "/run/phub/ctl.sock", stats_interval_ms = 10000 },
}

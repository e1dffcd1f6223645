-- phub.lua: the embedded default config, used by the README's run command.
--
-- A demo on a small shared machine (2 CPUs): the server's port is one end of a veth pair, "phub0",
-- which the run script creates; the other end lives in a network namespace with the workers
-- (198.18.0.0/24). The server reads it through DPDK's af_packet PMD, so no NIC or hugepages are needed.
-- A config is a Lua script that returns one table; docs/config.md describes every field.

local MiB = 1024 * 1024

return {
  -- EAL arguments (the command line may add more). No hugepages, no PCI scan, 512 MB of memory.
  -- Lcore 0 is the control thread; lcores 1 and 2 are workers. All three run on CPU 1, as an appliance
  -- has CPUs of its own: the run command keeps the demo's workers on CPU 0. Sharing one CPU is why
  -- polling below backs off when idle.
  eal_args = "--no-huge --no-pci -m 512 --file-prefix phub --lcores (0-2)@1 --log-level lib.eal:warning",

  ports = {
    {
      name = "demo0",
      -- One RX/TX queue pair per worker lcore: qpairs must be at least the number of lcores below (each
      -- needs a TX queue; validation says so), and every RX queue is polled (docs/config.md, "Queues"). The kernel
      -- drops what does not fit in a queue's ring, unseen by any counter of DPDK's af_packet PMD: 4096
      -- frames of 2 KiB per queue hold a round's bursts of the four demo workers (the PMD's default, 512,
      -- lost about a thousand pushes per run command).
      device = "net_af_packet0,iface=phub0,qpairs=2,framecnt=4096",
      ipv4 = "198.18.0.1/24",
      mtu = 1500,
      rx_desc = 512,
      tx_desc = 512,
      steering = "ring",  -- af_packet has no rte_flow: misdelivered packets go through the owner's ring
    },
  },

  -- Worker lcores. Lcore i (in this order) receives each job's chunks on UDP port port_base + i - 1.
  lcores = {
    { id = 1, ports = { "demo0" } },
    { id = 2, ports = { "demo0" } },
  },

  -- After 200 empty polls an lcore sleeps 50 us, so the workers on the same two CPUs get to run.
  polling = { idle_polls_before_sleep = 200, idle_sleep_us = 50 },

  jobs = {
    -- Data-parallel training of a small model: the server returns the mean of 4 workers' gradients.
    {
      id = 1,
      name = "demo-allreduce",
      mode = "allreduce",
      reduce = "mean",
      dtype = "fp32",
      workers = 4,
      port_base = 40000,           -- lcores 1 and 2 listen on 40000 and 40001
      secret = "demo-allreduce-secret",  -- keys each rank's session (sessions = true is the default with a secret)
      quota_bytes = "64MiB",
      chunk_bytes = "32KiB",
      allowed_sources = { "198.18.0.0/24" },
      keys = {                     -- about 1.17 million fp32 elements, 4.5 MiB per round
        { name = "embed.weight", elems = 1000 * 512 },
        { name = "fc1.weight", elems = 512 * 1024 },
        { name = "fc1.bias", elems = 1024 },
        { name = "fc2.weight", elems = 1024 * 128 },
        { name = "fc2.bias", elems = 128 },
        { name = "head.weight", elems = 128 * 10 },
        { name = "head.bias", elems = 10 },
      },
    },
    -- A parameter-server job: the server holds the weights and runs Adam; workers get new weights back.
    {
      id = 2,
      name = "demo-ps",
      mode = "ps",
      dtype = "fp32",
      workers = 2,
      port_base = 40100,
      secret = "demo-parameter-server-secret",
      quota_bytes = 16 * MiB,
      allowed_sources = { "198.18.0.0/24" },
      keys = {
        { name = "linear.weight", elems = 256 * 256 },
        { name = "linear.bias", elems = 256 },
      },
      optimizer = { kind = "adam", lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, adamw = true },
    },
  },

  timeouts = { round_stall_ms = 2000, drain_ms = 1000 },

  limits = {
    memory_bytes = "256MiB",
    max_jobs = 8,
    mbufs = 8191,                  -- per port; fits in the 512 MB of -m 512
    ring_entries = 8192,           -- hand-off ring per lcore pair: as many entries as the port's mbufs
  },

  control = { socket_path = "/run/phub/ctl.sock", stats_interval_ms = 5000 },
}

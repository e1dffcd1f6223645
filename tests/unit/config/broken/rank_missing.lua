-- expect: jobs[1].ranks_by_rack: rank 3 is in no rack
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } },
  racks = { { name = "a", hub_ipv4 = "198.18.0.1" }, { name = "b", hub_ipv4 = "198.18.0.2" } },
  rack = "a",
  jobs = { { id = 1, name = "j", workers = 4, port_base = 40000, insecure = true, keys = { { name = "w", elems = 8 } },
             ranks_by_rack = { a = { 0, 1 }, b = { 2 } } } },
}

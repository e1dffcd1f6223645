-- expect: jobs[2].workers: 0 is not in 1..1024
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } },
  jobs = {
    { id = 1, name = "a", workers = 2, port_base = 40000, insecure = true, keys = { { name = "w", elems = 8 } } },
    { id = 2, name = "b", workers = 0, port_base = 40010, insecure = true, keys = { { name = "w", elems = 8 } } },
  },
}

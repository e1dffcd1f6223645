-- expect: jobs[2].port_base: ports 40001..40002 overlap jobs[1] (40000..40001)
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 }, { id = 2 } },
  jobs = {
    { id = 1, name = "a", workers = 2, port_base = 40000, insecure = true, keys = { { name = "w", elems = 8 } } },
    { id = 2, name = "b", workers = 2, port_base = 40001, insecure = true, keys = { { name = "w", elems = 8 } } },
  },
}

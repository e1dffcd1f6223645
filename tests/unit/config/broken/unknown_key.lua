-- expect: jobs[1].frobnicate: unknown key
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } },
  jobs = { { id = 1, name = "a", workers = 2, port_base = 40000, insecure = true, frobnicate = true,
             keys = { { name = "w", elems = 8 } } } },
}

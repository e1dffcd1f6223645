-- expect: jobs[1].mode: expected string, got number
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } },
  jobs = { { id = 1, name = "j", mode = 3, workers = 2, port_base = 40000, insecure = true, keys = { { name = "w", elems = 8 } } } },
}

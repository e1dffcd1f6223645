-- expect: lcores[2].ports[1]: "p1" is not a port name
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1, ports = { "p0" } }, { id = 2, ports = { "p1" } } },
}

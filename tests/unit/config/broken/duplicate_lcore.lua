-- expect: lcores[3].id: 2 is used twice (lcores[1])
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 2 }, { id = 3 }, { id = 2 } },
}

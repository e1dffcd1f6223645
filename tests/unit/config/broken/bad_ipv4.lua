-- expect: ports[1].ipv4: "10.0.0.300/24" is not an IPv4 address with prefix
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "10.0.0.300/24" } },
  lcores = { { id = 1 } },
}

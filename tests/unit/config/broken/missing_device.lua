-- expect: ports[1].device: missing (required)
return {
  ports = { { name = "p0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } },
}

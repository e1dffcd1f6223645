-- expect: syntax_error.lua:5: '}' expected (to close '{' at line 2)
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } }
  jobs = {},
}

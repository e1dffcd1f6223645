-- phub rack grouping planned by phub-probe (8 hosts, 2 racks). A hub's config beside this file reads it with
--   local plan = include("racks.lua")
-- and sets `racks = plan.racks`, `rack = "<this hub's rack>"` and, in the job of these hosts,
-- `ranks_by_rack = plan.ranks_by_rack`. `hosts_by_rack` names the host of each of those ranks, in the
-- same order, for a config's own Lua (a template that places each rack's hub, say): no config field.
--
-- (This copy is the example two-rack.lua includes: `phub-probe run` writes such a file, with the
-- measured grouping, into its --out directory; docs/probe.md, "Outputs".)
return {
  racks = {
    { name = "rack1", hub_ipv4 = "198.18.20.1" },
    { name = "rack2", hub_ipv4 = "198.18.21.1" },
  },
  ranks_by_rack = {
    rack1 = { 0, 1, 2, 3 },
    rack2 = { 4, 5, 6, 7 },
  },
  hosts_by_rack = {
    rack1 = { "vm-a0", "vm-a1", "vm-a2", "vm-a3" },
    rack2 = { "vm-b0", "vm-b1", "vm-b2", "vm-b3" },
  },
}

-- smoke.lua: a short health check of a phub server. Closed loop, then an open-loop step at a modest rate,
-- then closed again (the rounds carry on across steps); every result must verify and every step settle.
-- Usage: phub-pktgen [EAL] -- --server-config server.lua --port ... -f tools/phub-pktgen/scenarios/smoke.lua
local seconds = tonumber(os.getenv("PKTGEN_SMOKE_SECONDS") or "1.5")

pktgen.set{ mode = "closed", duration = seconds, window = 32 }
local closed = pktgen.run()
pktgen.check(closed.rounds > 0, "closed loop completed no round")
pktgen.check(closed.mismatches == 0, "closed loop: results differ from the expected values")
pktgen.print(string.format("closed loop: %d rounds (%.1f/s), goodput %.3f Gbit/s, p99 round %.0f us",
  closed.rounds, closed.rounds_per_s, closed.goodput_gbps, closed.round_latency_us.p99))

-- Open loop at a fifth of the closed loop's push rate: well inside what the server sustained.
local rate = math.max(1000, closed.pushes_pps / 5)
local open = pktgen.run{ mode = "open", rate = rate, duration = seconds / 2 }
pktgen.check(open.settled, "open loop did not settle")
pktgen.check(open.mismatches == 0, "open loop: results differ from the expected values")
pktgen.print(string.format("open loop at %.0f pushes/s: loss %.4f%%", rate, open.loss * 100))

local again = pktgen.run{ mode = "closed", duration = seconds / 2 }
pktgen.check(again.rounds > 0 and again.mismatches == 0, "closed loop after the open loop")

pktgen.result("rounds", closed.rounds + again.rounds)
pktgen.result("goodput_gbps", closed.goodput_gbps)
pktgen.result("open_loss", open.loss)

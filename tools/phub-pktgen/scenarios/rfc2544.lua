-- rfc2544.lua: RFC 2544-style binary search for the highest open-loop push rate the server answers
-- without loss (every push of the step gets its result within the drain time).
-- Environment: PKTGEN_LO / PKTGEN_HI (pushes/s), PKTGEN_STEPS, PKTGEN_STEP_SECONDS.
local lo = tonumber(os.getenv("PKTGEN_LO") or "10000")
local hi = tonumber(os.getenv("PKTGEN_HI") or "2000000")
local steps = tonumber(os.getenv("PKTGEN_STEPS") or "7")
local seconds = tonumber(os.getenv("PKTGEN_STEP_SECONDS") or "1")

pktgen.set{ mode = "open", duration = seconds, drain_ms = 200, progress_ms = 0 }
local best = 0
for i = 1, steps do
  if pktgen.interrupted() then break end
  local rate = (lo + hi) / 2
  local r = pktgen.run{ rate = rate }
  pktgen.check(r.mismatches == 0, "results differ from the expected values at " .. rate .. " pushes/s")
  local lossless = r.loss == 0 and r.settled
  pktgen.print(string.format("step %d: offered %.0f pushes/s (achieved %.0f): loss %.4f%% -> %s",
    i, rate, r.offered_pps, r.loss * 100, lossless and "pass" or "fail"))
  if lossless then
    best = math.max(best, r.offered_pps)
    lo = rate
  else
    hi = rate
  end
end
pktgen.result("zero_loss_pps", best)
pktgen.print(string.format("zero-loss rate: %.0f pushes/s", best))

-- loss_sweep.lua: how rounds/s and round latency degrade when the workers lose, duplicate and reorder
-- their own pushes (the server never sees the lost ones; retransmission after a timeout recovers them).
-- Every step must still verify every result and settle.
local seconds = tonumber(os.getenv("PKTGEN_STEP_SECONDS") or "2")
pktgen.set{ mode = "closed", duration = seconds, rto_ms = 5, progress_ms = 0 }
for _, loss in ipairs({ 0, 0.001, 0.01, 0.05 }) do
  local r = pktgen.run{ loss = loss, dup = loss, reorder = loss > 0 }
  pktgen.check(r.mismatches == 0 and r.settled, "loss " .. loss .. ": wrong or unsettled")
  pktgen.print(string.format("loss %5.1f%%: %7.1f rounds/s, goodput %.3f Gbit/s, p50 %.0f us, p99 %.0f us, %d retransmits",
    loss * 100, r.rounds_per_s, r.goodput_gbps, r.round_latency_us.p50, r.round_latency_us.p99, r.retransmits))
  pktgen.result(string.format("rounds_per_s_loss_%g", loss), r.rounds_per_s)
end

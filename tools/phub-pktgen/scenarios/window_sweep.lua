-- window_sweep.lua: closed-loop goodput and round latency against the number of unanswered pushes each
-- emulated worker may have in flight (the client library's window).
local seconds = tonumber(os.getenv("PKTGEN_STEP_SECONDS") or "2")
pktgen.set{ mode = "closed", duration = seconds, progress_ms = 0 }
for _, window in ipairs({ 1, 4, 16, 64, 256 }) do
  local r = pktgen.run{ window = window }
  pktgen.check(r.mismatches == 0, "window " .. window .. ": results differ from the expected values")
  pktgen.print(string.format("window %3d: goodput %.3f Gbit/s, %.1f rounds/s, p50 %.0f us, p99 %.0f us",
    window, r.goodput_gbps, r.rounds_per_s, r.round_latency_us.p50, r.round_latency_us.p99))
  pktgen.result("goodput_gbps_window_" .. window, r.goodput_gbps)
end

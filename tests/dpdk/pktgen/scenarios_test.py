#!/usr/bin/python3
"""DPDK test: the shipped Lua scenarios other than smoke.lua (which pktgen-smoke runs), shortened through
their environment knobs, against the real phub-server over net_memif:
- rfc2544.lua must run its binary search (each step at the middle of the bracket left by the previous
  ones) and report as zero-loss rate the best lossless step;
- loss_sweep.lua must retransmit what the workers lose and still verify and settle every step;
- window_sweep.lua must run one closed-loop step per window with results for each."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import server, testing  # noqa: E402

SCENARIOS = os.path.join(ROOT, "tools", "phub-pktgen", "scenarios")
LO, HI, STEPS = 200, 100000, 5


def common(t, name, r, steps):
    t.equal("%s: pktgen exit status" % name, r.status, 0)
    t.equal("%s: server exit status" % name, r.server_status, 0)
    if not t.check("%s: summary" % name, r.summary is not None):
        return None
    s = r.summary
    t.check("%s: scenario checks passed" % name, s["ok"] and not s["failures"], str(s["failures"]))
    t.equal("%s: steps" % name, len(s["steps"]), steps)
    t.equal("%s: mismatches" % name, sum(x["mismatches"] for x in s["steps"]), 0)
    t.check("%s: results verified" % name, all(x["results_ok"] > 0 for x in s["steps"]))
    t.equal("%s: server drops" % name, r.counters["drops"], {})
    return s


def scenario(t, pair, name, steps):
    """Run tools/phub-pktgen/scenarios/<name>.lua with half-second steps; the common checks; the summary."""
    os.environ["PKTGEN_STEP_SECONDS"] = "0.5"
    r = testing.Result(*pair.run(["-f", os.path.join(SCENARIOS, name + ".lua")], timeout=150))
    return common(t, name, r, steps)


def rfc2544(t, pair):
    os.environ.update(PKTGEN_LO=str(LO), PKTGEN_HI=str(HI), PKTGEN_STEPS=str(STEPS))
    s = scenario(t, pair, "rfc2544", STEPS)
    if s is None:
        return
    lo, hi, best = LO, HI, 0.0
    for i, step in enumerate(s["steps"]):
        rate = (lo + hi) / 2
        t.check("rfc2544 step %d offered about %.0f pushes/s" % (i + 1, rate),
                0.5 * rate <= step["offered_pps"] <= 1.1 * rate, str(step["offered_pps"]))
        t.equal("rfc2544 step %d is open loop" % (i + 1), step["mode"], "open")
        print("rfc2544 step %d: offered %.0f pushes/s, loss %.5f, settled %s" % (
            i + 1, step["offered_pps"], step["loss"], step["settled"]), flush=True)
        if step["loss"] == 0 and step["settled"]:
            best, lo = max(best, step["offered_pps"]), rate
        else:
            hi = rate
    got = s["results"].get("zero_loss_pps")
    t.check("rfc2544 reports the best lossless step", got is not None and abs(got - best) <= 1e-6 * max(best, 1),
            "got %r, expected %r" % (got, best))
    t.check("rfc2544 found a lossless rate", best > 0)


def loss_sweep(t, pair):
    s = scenario(t, pair, "loss_sweep", 4)
    if s is None:
        return
    t.equal("loss_sweep: the first step injects nothing",
            (s["steps"][0]["dropped_injected"], s["steps"][0]["duplicated_injected"]), (0, 0))
    for step in s["steps"][1:]:
        t.check("loss_sweep: lost pushes were retransmitted",
                step["retransmits"] >= step["dropped_injected"] > 0 or step["dropped_injected"] == 0,
                "%d retransmits, %d dropped" % (step["retransmits"], step["dropped_injected"]))
    t.check("loss_sweep: the 5% step lost pushes", s["steps"][-1]["dropped_injected"] > 0)
    t.check("loss_sweep: every step settled", all(x["settled"] for x in s["steps"]))
    t.equal("loss_sweep: results", sorted(s["results"]), sorted("rounds_per_s_loss_%s" % v for v in
                                                                 ("0", "0.001", "0.01", "0.05")))


def window_sweep(t, pair):
    s = scenario(t, pair, "window_sweep", 5)
    if s is None:
        return
    for w in (1, 4, 16, 64, 256):
        t.check("window_sweep: goodput at window %d" % w, s["results"].get("goodput_gbps_window_%d" % w, 0) > 0)
    t.check("window_sweep: rounds completed in every step", all(x["rounds"] > 0 for x in s["steps"]))


def body(a, t):
    pair = testing.Pair(a, "scenarios")
    try:
        pair.write([server.job(1, "scen", 4, 60000, secret="scen-1")])
        rfc2544(t, pair)
        loss_sweep(t, pair)
        window_sweep(t, pair)
    finally:
        pair.close()


if __name__ == "__main__":
    sys.exit(testing.main("the shipped Lua scenarios", body))

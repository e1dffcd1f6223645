#!/usr/bin/python3
"""DPDK test: a few seconds of the real phub-server driven by the real phub-pktgen over net_memif, with
the shipped smoke scenario (closed loop, open loop, closed loop again). Every result must verify, rounds
must complete, every step must settle, the server must drop nothing, and the push bytes the server
accepted must equal the push bytes whose results the generator received. Then a generator that asks ARP for
an address the server does not own: under the harness (--linger) it must not restart its memif port under
the polling server (DPDK 22.11's memif can crash the peer so), but exit with status 75, the server untouched."""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import pktgen, server, testing  # noqa: E402

SCENARIO = os.path.join(ROOT, "tools", "phub-pktgen", "scenarios", "smoke.lua")


def body(a, t):
    r = testing.run_pair(a, "smoke", [
        # round_modulus 8: the generator sends this job's pushes from pre-built frames
        server.job(1, "smoke-fp32", 4, 120000, secret="smoke-1", reduce="mean", round_modulus=8),
        server.job(2, "smoke-ps-bf16", 2, 30000, dtype="bf16", mode="ps", secret="smoke-2",
                   optimizer={"kind": "adam", "lr": 0.01}),
    ], ["-f", SCENARIO, "--frame-cache-mb", "64",
        "--recycle-frames", "1"])  # one frame per pattern and rank: some pushes find it in use
    t.equal("pktgen exit status", r.status, 0)
    t.equal("phub-server exit status", r.server_status, 0)
    s = r.summary
    if not t.check("pktgen wrote a summary", s is not None):
        return
    steps = s["steps"]
    t.equal("steps run", len(steps), 3)
    t.check("scenario checks passed", s["ok"] and not s["failures"], str(s["failures"]))
    t.equal("mismatches", sum(x["mismatches"] for x in steps), 0)
    t.check("every step settled", all(x["settled"] for x in steps))
    t.check("rounds completed", s["results"].get("rounds", 0) > 0, str(s["results"]))
    t.check("results verified", sum(x["results_ok"] for x in steps) > 0)
    t.equal("server drops", r.counters["drops"], {})
    t.check("pushes came from pre-built frames", re.search(r"pktgen: frame cache: job 1: [1-9]", r.err) is not None,
            r.err[:800])
    # job 2 has no round_modulus: its whole-segment pushes go out from recycled frames, headers rewritten, or
    # are built when the frame is still in use; both kinds must verify (above)
    t.check("pushes went out from recycled frames", sum(x.get("tx_recycled", 0) for x in steps) > 0,
            str([x.get("tx_recycled") for x in steps]))
    t.check("pushes were built while their frame was in use", sum(x.get("tx_recycle_busy", 0) for x in steps) > 0,
            str([x.get("tx_recycle_busy") for x in steps]))
    for name in ("smoke-fp32", "smoke-ps-bf16"):
        t.check("server completed rounds of " + name, r.counters["jobs"].get(name, {}).get("rounds_completed", 0) > 0)
    accepted = sum(j["push_payload_bytes"] for j in r.counters["jobs"].values())
    answered = sum(x["answered_bytes"] for x in steps)
    t.equal("server accepted bytes == generator answered bytes", accepted, answered)
    print("rounds %d, goodput %.3f Gbit/s, open-loop loss %.4f%%" % (
        s["results"].get("rounds", 0), s["results"].get("goodput_gbps", 0), 100 * s["results"].get("open_loss", 0)))

    # Nobody answers ARP for 198.18.0.77: the harness starts the pair twice, and both times the generator
    # gives up without a port restart.
    r = testing.run_pair(a, "noarp", [server.job(1, "noarp", 1, 1000)],
                         ["--server-ip", "198.18.0.77", "--rounds", "1"], timeout=60)
    t.equal("unanswered ARP: pktgen exit status", r.status, pktgen.ARP_UNANSWERED)
    t.equal("unanswered ARP: phub-server exit status", r.server_status, 0)
    t.check("unanswered ARP: said so, no port restart",
            "not restarted under --linger" in r.err and "restarting port" not in r.err, r.err[-600:])


if __name__ == "__main__":
    sys.exit(testing.main("phub-pktgen smoke over net_memif", body))

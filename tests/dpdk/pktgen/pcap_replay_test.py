#!/usr/bin/python3
"""DPDK test: a trace written by `phub-pktgen --write-pcap` (classic microsecond pcap) replayed into the
real phub-server through net_pcap (rx_pcap) completes exactly the expected rounds with no drops, and the
results the server wrote (tx_pcap) all verify bit for bit; a wrong expectation must be caught. Replayed in a
loop (net_pcap infinite_rx, as Pktgen-DPDK loops a file), the round modulus keeps the server aggregating:
every pass completes the trace's rounds again, with no duplicates, errors or drops."""
import os
import struct
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import pktgen, procs, server, testing  # noqa: E402

ROUNDS = 4


def jobs(reduce="mean"):
    return [
        server.job(1, "trace-bf16", 4, 50000, dtype="bf16", reduce=reduce, secret="trace-1", round_modulus=ROUNDS),
        server.job(2, "trace-ps", 2, 20000, mode="ps", round_modulus=ROUNDS, optimizer={"kind": "adam", "lr": 0.01}),
        server.job(3, "trace-det", 3, 9000, deterministic=True, round_modulus=ROUNDS),
    ]


def replay(a, t, cfg, prefix, seconds, label):
    """Run the server on `cfg` (its port reads the trace) for `seconds`; returns its exit counters."""
    with procs.Cleanup() as c:
        srv = server.start(a.server, cfg, prefix, c, duration=seconds)
        sstatus = srv.wait(60)
        counters = server.parse_counters(srv.stdout())
    t.equal("%s: phub-server exit status" % label, sstatus, 0)
    t.equal("%s: server drops" % label, counters["drops"], {})
    return counters


def body(a, t):
    with tempfile.TemporaryDirectory(prefix="phub-pcap-") as d:
        trace, out, cfg = (os.path.join(d, n) for n in ("trace.pcap", "out.pcap", "server.lua"))
        prefix = "phubs-pcap-%d" % os.getpid()
        server.config(cfg, prefix=prefix, device="net_pcap0,rx_pcap=%s,tx_pcap=%s" % (trace, out), jobs=jobs())
        status, w, err = pktgen.offline(a.pktgen, ["--server-config", cfg, "--write-pcap", trace,
                                                   "--pcap-rounds", str(ROUNDS)])
        if not t.check("trace written", status == 0 and w is not None, err):
            return
        with open(trace, "rb") as f:
            magic, major, minor, _, _, _, linktype = struct.unpack("<IHHiIII", f.read(24))
        t.equal("classic microsecond pcap magic", hex(magic), "0xa1b2c3d4")
        t.equal("pcap version", (major, minor), (2, 4))
        t.equal("link type Ethernet", linktype, 1)

        counters = replay(a, t, cfg, prefix, 3, "once")
        for e in w["expect"]:
            got = counters["jobs"].get(e["name"], {})
            for key in ("pushes", "rounds_completed", "results_sent", "inits"):
                want = e[key] + (e["inits"] if key == "results_sent" else 0)  # each init is answered too
                t.equal("%s %s" % (e["name"], key), got.get(key), want)
            t.equal("%s duplicates" % e["name"], got.get("duplicates"), 0)
            t.equal("%s errors_sent" % e["name"], got.get("errors_sent"), 0)

        status, v, err = pktgen.offline(a.pktgen, ["--server-config", cfg, "--verify-pcap", out])
        if t.check("server output verified", status == 0 and v is not None, err):
            expected = sum(e["results_sent"] + e["inits"] for e in w["expect"])
            t.equal("results in the server's pcap", v["results"], expected)
            t.equal("results matching bit for bit", v["results_ok"], expected)
            t.equal("mismatches", v["mismatches"], 0)
        # The check bites: the same output against a sum (not mean) expectation must mismatch.
        wrong = os.path.join(d, "wrong.lua")
        server.config(wrong, prefix=prefix, device="net_null0", jobs=jobs(reduce="sum"))
        status, v, _ = pktgen.offline(a.pktgen, ["--server-config", wrong, "--verify-pcap", out])
        t.check("a wrong expectation is caught", status == 2 and v is not None and v["mismatches"] > 0,
                "status %s" % status)
        # A trace is a replay, which a job with sessions refuses: pktgen does not write one for such a job.
        sess = os.path.join(d, "sessions.lua")
        server.config(sess, prefix=prefix, device="net_null0",
                      jobs=[dict(j, sessions=True) if j.get("secret") else j for j in jobs()])
        status, _, err = pktgen.offline(a.pktgen, ["--server-config", sess, "--write-pcap",
                                                   os.path.join(d, "refused.pcap"), "--pcap-rounds", "1"])
        t.check("a sessions job is refused, by name", status != 0 and "runs sessions" in err and "trace-bf16" in err,
                "status %s: %s" % (status, err))
        looped(a, t, d, w)
        print("trace: %d frames, %d bytes, %d rounds" % (w["frames"], w["bytes"], w["rounds"]))


def looped(a, t, d, w):
    """The same trace looped for two seconds: rounds keep completing at the trace's pushes per round."""
    cfg = os.path.join(d, "looped.lua")
    prefix = "phubs-pcaploop-%d" % os.getpid()
    server.config(cfg, prefix=prefix, jobs=jobs(),
                  device="net_pcap0,rx_pcap=%s,tx_pcap=/dev/null,infinite_rx=1" % os.path.join(d, "trace.pcap"))
    counters = replay(a, t, cfg, prefix, 2, "looped")
    for e in w["expect"]:
        got = counters["jobs"].get(e["name"], {})
        rounds, pushes = got.get("rounds_completed", 0), got.get("pushes", 0)
        t.check("looped %s: at least 3 passes of aggregation" % e["name"], rounds >= 3 * e["rounds_completed"],
                "%d rounds completed, %d per pass" % (rounds, e["rounds_completed"]))
        per_round = e["pushes"] / e["rounds_completed"]
        t.check("looped %s: every pass aggregates (pushes per completed round)" % e["name"],
                abs(pushes - rounds * per_round) <= e["pushes"], "%d pushes for %d rounds" % (pushes, rounds))
        t.equal("looped %s duplicates" % e["name"], got.get("duplicates"), 0)
        t.equal("looped %s errors_sent" % e["name"], got.get("errors_sent"), 0)


if __name__ == "__main__":
    sys.exit(testing.main("pcap trace replayed through net_pcap", body))

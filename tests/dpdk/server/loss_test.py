#!/usr/bin/python3
"""DPDK test (issue 3 "Tests"): the emulated workers drop 5% of their own pushes, send 5% twice and
shuffle their order; every worker must still complete a fixed number of rounds with every result
correct, and the server must count the duplicates and the retransmissions it saw."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import server, testing  # noqa: E402

ROUNDS = 12


def body(a, t):
    r = testing.run_pair(a, "loss", [
        server.job(1, "lossy-sum", 4, 60000, secret="l-1"),
        server.job(2, "lossy-ps", 4, 20000, dtype="bf16", mode="ps", optimizer={"kind": "momentum", "lr": 0.02}),
        server.job(3, "lossy-det", 8, 20000, deterministic=True, reduce="mean"),
    ], ["--rounds", str(ROUNDS), "--duration", "60", "--loss", "0.05", "--dup", "0.05", "--reorder", "--rto-ms", "5"],
        lcores=2, gen_lcores=2, timeout=150)
    t.equal("pktgen exit status", r.status, 0)
    t.equal("server exit status", r.server_status, 0)
    if not t.check("summary", r.summary is not None):
        return
    step = r.summary["steps"][0]
    t.check("pushes were dropped", step["dropped_injected"] > 0, str(step["dropped_injected"]))
    t.check("pushes were duplicated", step["duplicated_injected"] > 0)
    t.check("lost pushes were retransmitted", step["retransmits"] >= step["dropped_injected"])
    t.check("settled", step["settled"])
    for j in step["jobs"]:
        t.equal("%s: rounds" % j["name"], j["rounds"], ROUNDS)
        t.equal("%s: mismatches" % j["name"], j["mismatches"], 0)
        c = r.counters["jobs"].get(j["name"], {})
        t.equal("%s: server rounds_completed" % j["name"], c.get("rounds_completed"), ROUNDS * j["chunks"])
        t.check("%s: server counted duplicates" % j["name"], c.get("duplicates", 0) > 0)
        t.check("%s: server saw retransmissions" % j["name"], c.get("retransmits_seen", 0) > 0)
    t.equal("server drops", r.counters["drops"], {})


if __name__ == "__main__":
    sys.exit(testing.main("loss, duplication and reordering from the workers", body))

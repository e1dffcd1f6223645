#!/usr/bin/python3
"""DPDK test (issue 3 "Tests"): tenants. Packets with a wrong tag, from a rank outside the job, or for an
unknown job are dropped and counted per reason (exactly as many as the generator injected), while every
job, the targeted one included, keeps completing rounds with correct results. A job whose buffers exceed
its quota, or the server's memory limit, is refused at admission with a message naming it."""
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import procs, server, testing  # noqa: E402

FAULTS = {"bad_tag": 17, "foreign_rank": 19, "unknown_job": 23}
COUNTER = {"bad_tag": "bad_tag", "foreign_rank": "bad_rank", "unknown_job": "unknown_job"}


def refused(t, a, label, jobs, memory, words):
    with tempfile.TemporaryDirectory(prefix="phub-quota-") as d:
        cfg = os.path.join(d, "server.lua")
        prefix = "phubs-quota-%d" % os.getpid()
        server.config(cfg, prefix=prefix, device=server.memif_device(os.path.join(d, "m.sock")), jobs=jobs,
                      memory=memory)
        with procs.Cleanup() as c:
            c.add(prefix=prefix)
            status, out, err = procs.run([a.server, "--config", cfg, "--duration", "1"], 60)
    t.equal(label + ": server refuses to start", status, 1)
    text = out + err
    t.check(label + ": message names the job and the reason", all(w in text for w in words), text[-400:])


def body(a, t):
    inject = ",".join("%s=%d" % kv for kv in FAULTS.items())
    r = testing.run_pair(a, "tenants", [
        server.job(1, "team-a", 4, 40000, secret="team-a-secret-0001"),
        server.job(2, "team-b", 4, 40000, dtype="bf16", secret="team-b-secret-0001", reduce="mean"),
        server.job(3, "team-c", 2, 20000, mode="ps", secret="team-c-secret-0001", optimizer={"kind": "adam", "lr": 0.001}),
    ], ["--duration", "1.5", "--inject", inject, "--inject-job", "2"], lcores=2, gen_lcores=2)
    t.equal("pktgen exit status", r.status, 0)
    t.equal("server exit status", r.server_status, 0)
    if not t.check("summary", r.summary is not None):
        return
    step = r.summary["steps"][0]
    drops = r.counters["drops"]
    for fault, n in FAULTS.items():
        t.equal("%s injected" % fault, step["faults_sent"][fault], n)
        t.equal("server counted %s as %s" % (fault, COUNTER[fault]), drops.get(COUNTER[fault]), n)
    t.equal("no other drops", {k: v for k, v in drops.items() if k not in COUNTER.values()}, {})
    for j in step["jobs"]:
        t.check("%s: rounds completed" % j["name"], j["rounds"] > 0)
        t.equal("%s: mismatches" % j["name"], j["mismatches"], 0)

    big = [{"name": "w", "elems": 4_000_000}]
    refused(t, a, "quota", [server.job(1, "over-quota", 4, 0, keys=big, quota_bytes="4MiB")],
            "256MiB", ["over-quota", "refused", "quota"])
    mid = [{"name": "w", "elems": 1_000_000}]  # about 12 MiB each: either fits 16 MiB alone, not both
    refused(t, a, "server memory", [server.job(1, "fits", 2, 0, keys=mid), server.job(2, "too-big", 4, 0, keys=mid)],
            "16MiB", ["too-big", "refused", "limits.memory"])


if __name__ == "__main__":
    sys.exit(testing.main("tenants: isolation, per-reason drops, quotas", body))

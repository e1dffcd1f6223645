#!/usr/bin/python3
"""DPDK test (issue 3 "Tests"): 2, 4 and 8 emulated workers x fp32/bf16 x allreduce (sum, mean) / ps
(SGD, momentum, Nesterov, Adam) / deterministic, several jobs per server, one or two server lcores.
phub-pktgen checks every result bit for bit: allreduce sums are exact (integer gradients), ps weights
come from replaying the optimizer with lib/agg's scalar kernels, and deterministic jobs push
order-sensitive values in shuffled order, so only a rank-order sum matches. A negative control (the same
values against a non-deterministic job) must report mismatches."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import server, testing  # noqa: E402

OPTIMIZERS = ["sgd", "momentum", "nesterov", "adam"]
RUNS = [(2, "fp32", 1), (2, "bf16", 2), (4, "fp32", 2), (4, "bf16", 1), (8, "fp32", 1), (8, "bf16", 2)]


def jobs(i, workers, dtype):
    keys = [{"name": "w", "elems": 30000}, {"name": "b", "elems": 77}]
    opt = {"kind": OPTIMIZERS[i % 4], "lr": 0.01, "momentum": 0.9}
    return [
        server.job(1, "sum", workers, 0, dtype=dtype, keys=keys, secret="m-sum"),
        server.job(2, "mean", workers, 0, dtype=dtype, keys=keys, reduce="mean", chunk_bytes=16384),
        server.job(3, "ps-" + opt["kind"], workers, 0, dtype=dtype, keys=keys, mode="ps", optimizer=opt,
                   reduce="mean" if i % 2 else "sum", secret="m-ps"),
        server.job(4, "det", workers, 0, dtype=dtype, keys=keys, deterministic=True, reduce="mean"),
    ]


def check_run(t, label, r, names):
    t.equal(label + ": pktgen exit status", r.status, 0)
    t.equal(label + ": server exit status", r.server_status, 0)
    if r.summary is None:
        return t.check(label + ": summary", False)
    step = r.summary["steps"][0]
    t.check(label + ": settled", step["settled"])
    for j in step["jobs"]:
        t.check("%s %s: rounds completed" % (label, j["name"]), j["rounds"] > 0, str(j))
        t.equal("%s %s: mismatches" % (label, j["name"]), j["mismatches"], 0)
    t.equal(label + ": server drops", r.counters["drops"], {})
    for n in names:
        t.check("%s: server rounds of %s" % (label, n), r.counters["jobs"].get(n, {}).get("rounds_completed", 0) > 0)
    accepted = sum(j["push_payload_bytes"] for j in r.counters["jobs"].values())
    t.equal(label + ": server accepted bytes == answered bytes", accepted, step["answered_bytes"])
    return True


def body(a, t):
    for i, (workers, dtype, lcores) in enumerate(RUNS):
        js = jobs(i, workers, dtype)
        r = testing.run_pair(a, "matrix%d" % i, js, ["--duration", "1.2", "--reorder"], lcores=lcores, gen_lcores=lcores)
        check_run(t, "%d workers %s %d lcore(s)" % (workers, dtype, lcores), r, [j["name"] for j in js])
    # Negative control: order-sensitive values against a job that sums in arrival order.
    r = testing.run_pair(a, "matrix-neg", [server.job(1, "arrival-order", 8, 30000, dtype="bf16", reduce="mean")],
                         ["--duration", "1", "--reorder", "--values", "order"])
    t.check("non-deterministic job fails the rank-order check", r.status == 2 and r.summary is not None and
            r.summary["steps"][0]["mismatches"] > 0, "status %s" % r.status)


if __name__ == "__main__":
    sys.exit(testing.main("phub-server job matrix", body))

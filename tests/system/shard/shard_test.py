#!/usr/bin/python3
"""Several servers in one rack (issue 15): a job sharded over two or three real phub-servers gives the results one
server gives, bit for bit; a server given the wrong shard index is reported, not waited for.

Test bed: phubnet's (tests/system/client) with up to three phub-servers on the bridge, 198.18.0.1 .. .3, each in
its own namespace with its own EAL file prefix, control socket and config (`shard = { index = k, count = N }`),
two workers in namespaces. Every job has two workers, so each result element is one IEEE addition (a + b == b + a:
no arrival order can change it) followed by the same per-element math (mean scale, bf16 rounding, the optimizer)
on every server layout. Phases, each with its own set of servers:
  single   1 server, 1 lcore: the reference
  3x1      3 servers x 1 lcore, the same jobs sharded 3 ways
  2x2      2 servers x 2 lcores (af_packet, two queue pairs, steering "ring"), sharded 2 ways
  wrong    2 servers x 1 lcore, both told shard index 0; then both told the other's index
Jobs: fp32 allreduce (sum), bf16 allreduce (mean), ps momentum and ps Adam (fp32) - seeded data through the
Python package (tests/system/shard/shard_worker.py), which checks allreduce results against its own reference and
writes every result (ps: every round's weights) to a file; the sharded phases' files must equal the single
server's byte for byte. phub-demo-worker (`--server IP,IP,IP`) runs an fp32 allreduce, a bf16 and the two ps jobs
on every phase and checks every element itself. Each server's counters (`phub-ctl stats --json`): no drops
against any job, every server took pushes of every multi-chunk job, and the push bytes spread over the servers
as the layout's greedy balance says (each server's share within 0.75..1.25 of 1/N).
Wrong shard indexes: the servers answer the misdirected pushes bad_request and count them as wrong_owner; each
rank fails at once (well within its 4 s timeout) with chunk_map, or broken for operations waited for after the
first failure, and a message naming the shard order (lib/client/src/messages.cpp).
Prints ok/FAIL per check and `SUBTESTS passed=N failed=M`; exits 1 on any failure.
Usage: shard_test.py --build BUILD_DIR   (root; removes namespaces, processes and files, also on failure)
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import livenet  # noqa: E402
from livenet import Checks, phubnet  # noqa: E402

KEYS = [100000, 30000, 4097, 1]  # fp32 chunks of 8192 elements: 13 + 4 + 1 + 1
ROUNDS = 4
WORKERS = 2
METRICS_MS = 50  # control.metrics_interval_ms: how old the counters phub-ctl shows may be
ADAM = dict(kind="adam", lr=0.01, weight_decay=0.01, adamw=True)
MOMENTUM = dict(kind="momentum", lr=0.05, momentum=0.9)
# (id, name, runner, job fields); runner "py:KIND" is shard_worker.py, "demo" is phub-demo-worker.
JOBS = [
    (1, "ar32", "py:allreduce", dict(reduce="sum")),
    (2, "ar16", "py:allreduce", dict(reduce="mean", dtype="bf16")),
    (3, "ps-mom", "py:ps", dict(mode="ps", reduce="mean", optimizer=MOMENTUM)),
    (4, "ps-adam", "py:ps", dict(mode="ps", reduce="mean", optimizer=ADAM)),
    (5, "demo-ar32", "demo", dict(reduce="sum")),
    (6, "demo-ar16", "demo", dict(reduce="mean", dtype="bf16")),
    (7, "demo-mom", "demo", dict(mode="ps", reduce="mean", optimizer=MOMENTUM)),
    (8, "demo-adam", "demo", dict(mode="ps", reduce="mean", optimizer=ADAM)),
]


def port_base(jid):
    return 43000 + 100 * jid


def jobs_for(shard, count, only=None):
    """The job tables of shard `shard` of `count` (count 1: unsharded)."""
    out = []
    for jid, name, _, fields in JOBS:
        if only and name not in only:
            continue
        extra = dict(fields)
        if count > 1:
            extra["shard"] = dict(index=shard, count=count)
        out.append(phubnet.job(jid, name, WORKERS, KEYS, port_base(jid), **extra))
    return out


class ShardNet(phubnet.Net):
    """phubnet's test bed with `servers` phub-servers on its bridge: server k lives in namespace <p>-srv (k = 0,
    phubnet's own) or <p>-srv<k>, has the address 198.18.0.<k+1>, EAL file prefix <p> or <p>s<k>, control socket
    ctl<k>.sock and config phub<k>.lua in the temporary directory."""

    def __init__(self, workers, servers, **kw):
        super().__init__(workers, **kw)
        self.servers = servers
        self.running = {}  # server index -> process

    def ns_shard(self, k):
        return self.ns_server() if k == 0 else "%s-srv%d" % (self.prefix, k)

    def ip(self, k):
        return "198.18.0.%d" % (k + 1)

    def eal_prefix(self, k):
        return self.prefix if k == 0 else "%ss%d" % (self.prefix, k)

    def socket(self, k):
        return os.path.join(self.tmp, "ctl%d.sock" % k)

    def log(self, k):
        return os.path.join(self.tmp, "server%d.log" % k)

    def server_list(self, count):
        return ",".join(self.ip(k) for k in range(count))

    def up(self):
        super().up()
        for k in range(1, self.servers):
            self.add_server_namespace(self.ns_shard(k), "sv%d" % k)

    def start(self, count, lcores, jobs_of):
        """Servers 0 .. count-1 with `lcores` lcores each; server k serves jobs_of(k)."""
        self.lcores = lcores
        for k in range(count):
            path = livenet.write(os.path.join(self.tmp, "phub%d.lua" % k), self.config_text(
                jobs_of(k), server_ip=self.ip(k), file_prefix=self.eal_prefix(k), socket_path=self.socket(k),
                settings=dict(control=dict(metrics_interval_ms=METRICS_MS))))
            self.running[k] = self.launch_server(self.ns_shard(k), path, self.log(k), timeout_s=240)
        self.config_path = os.path.join(self.tmp, "phub0.lua")  # phub-demo-worker reads the job from it

    def stop(self):
        for k in self.running:
            self.signal_server(signal.SIGINT, self.ns_shard(k))
        for p in self.running.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.running = {}

    def logs(self):
        return "\n".join("--- server %d:\n%s" % (k, open(self.log(k)).read()[-1500:]) for k in self.running)


def py_env(net, jid, count, lcores, dtype="fp32", mode="allreduce", reduce="sum", timeout_ms=20000):
    return {"PYTHONPATH": os.path.join(net.build, "lib", "client", "python"), "PHUB_SERVER": net.server_list(count),
            "PHUB_PORT_BASE": str(port_base(jid)), "PHUB_JOB": str(jid), "PHUB_LCORES": str(lcores),
            "PHUB_MODE": mode, "PHUB_DTYPE": dtype, "PHUB_REDUCE": reduce, "WORLD_SIZE": str(WORKERS),
            "PHUB_TIMEOUT_MS": str(timeout_ms)}


def start_jobs(net, phase, count, lcores, only=None):
    """Every job's ranks, started at once: [(job name, rank, process, result file or None)]."""
    runs = []
    for jid, name, runner, fields in JOBS:
        if only and name not in only:
            continue
        for rank in range(WORKERS):
            if runner == "demo":
                argv = ["timeout", "90", net.exe("tools/phub-demo/phub-demo-worker"), "--config", net.config_path,
                        "--job", name, "--rank", str(rank), "--server", net.server_list(count), "--rounds",
                        str(ROUNDS), "--timeout-ms", "20000"]
                runs.append((name, rank, net.popen(rank, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE), None))
                continue
            out = os.path.join(net.tmp, "%s-%s-%d.bin" % (phase, name, rank))
            env = dict(py_env(net, jid, count, lcores, dtype=fields.get("dtype", "fp32"),
                              mode=fields.get("mode", "allreduce"), reduce=fields["reduce"]), RANK=str(rank))
            argv = ["timeout", "90", "/usr/bin/python3", os.path.join(HERE, "shard_worker.py"), runner[3:],
                    ",".join(map(str, KEYS)), str(ROUNDS), out]
            runs.append((name, rank, net.popen(rank, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
                         out))
    return runs


def finish_jobs(runs):
    """{job name: (ok, detail)}: every rank exited 0 and verified its results."""
    res = {}
    for name, rank, p, out in runs:
        so, se = p.communicate(timeout=120)
        if out is None:
            s = phubnet.parse_summary(so)
            ok = p.returncode == 0 and s.get("status") == "OK" and s.get("mismatches") == "0"
            detail = "rank %d: exit %d status=%s mismatches=%s retransmits=%s" % (
                rank, p.returncode, s.get("status"), s.get("mismatches"), s.get("retransmits"))
        else:
            line = so.strip().splitlines()[-1] if so.strip() else "{}"
            r = json.loads(line)
            ok = p.returncode == 0 and r.get("ok") is True
            detail = "rank %d: exit %d %s" % (rank, p.returncode, line)
        if not ok:
            detail += " | " + se.strip()[-400:]
        prev = res.get(name, (True, []))
        res[name] = (prev[0] and ok, prev[1] + [detail])
    return res


def server_stats(net, count):
    """Each server's `phub-ctl stats --json`, from a counter sample taken after this call began (the control loop
    samples every METRICS_MS: wait until the sample number has gone up twice)."""
    out = []
    for k in range(count):
        ctl = livenet.Ctl(net, socket=net.socket(k))
        first = ctl.stats()
        s = first
        deadline = time.time() + 10
        while s["sample"] < first["sample"] + 2 and time.time() < deadline:
            time.sleep(METRICS_MS / 1000)
            s = ctl.stats()
        out.append(s)
    return out


def check_counters(check, phase, stats, count):
    """No drops against any job on any server; push bytes of each multi-chunk job on every server, spread."""
    drops = {}
    for k, s in enumerate(stats):
        for j in s["jobs"]:
            # not_initialized: a ps rank's first pull may come before rank 0's init; the client retries it.
            bad = {r: n for r, n in j["drops"].items() if n and r != "not_initialized"}
            if bad:
                drops["server %d job %s" % (k, j["name"])] = bad
    check("%s: no drops against any job on any server (wrong_owner, bad_request, ...; not_initialized aside)" % phase,
          not drops,
          json.dumps(drops))
    per_server = [sum(j["push_payload_bytes"] for j in s["jobs"]) for s in stats]
    total = sum(per_server) or 1
    shares = [b / total for b in per_server]
    idle = ["server %d job %s" % (k, j["name"]) for k, s in enumerate(stats) for j in s["jobs"] if j["pushes"] == 0]
    check("%s: push bytes per server %s (shares %s), every server took pushes of every job" % (
        phase, per_server, " ".join("%.2f" % x for x in shares)),
        not idle and all(0.75 / count <= x <= 1.25 / count for x in shares), "no pushes: %s" % idle)


def run_phase(check, net, phase, count, lcores):
    t0 = time.time()
    net.start(count, lcores, lambda k: jobs_for(k, count))
    try:
        res = finish_jobs(start_jobs(net, phase, count, lcores))
        for name, (ok, detail) in res.items():
            check("%s: %s: every rank's results verified" % (phase, name), ok, "\n  ".join(detail))
        stats = server_stats(net, count)
        if count > 1:
            check_counters(check, phase, stats, count)
        if check.failed:
            print(net.logs())
    finally:
        net.stop()
    print("  (%s: %.1f s)" % (phase, time.time() - t0), flush=True)


def compare(check, net, phase):
    """The phase's result files against the single server's, byte for byte."""
    for _, name, runner, _ in JOBS:
        if runner == "demo":
            continue
        for rank in range(WORKERS):
            a = os.path.join(net.tmp, "single-%s-%d.bin" % (name, rank))
            b = os.path.join(net.tmp, "%s-%s-%d.bin" % (phase, name, rank))
            da = open(a, "rb").read() if os.path.exists(a) else b""
            db = open(b, "rb").read() if os.path.exists(b) else b"-"
            check("%s: %s rank %d: %d result bytes equal to one server's" % (phase, name, rank, len(db)), da == db,
                  "single %d bytes, %s %d bytes, first difference at byte %s" % (
                      len(da), phase, len(db), next((i for i, (x, y) in enumerate(zip(da, db)) if x != y), "-")))


SHARD_HINT = "the servers' shard.index must follow the order of the client's server list"


def wrong_shard(check, net, indexes):
    """Two servers given shard indexes `indexes` (should be 0, 1); one fp32 allreduce rank pair, every key
    started at once. The first bad_request answer fails its operation with chunk_map and the shard hint; the
    operations waited for after it fail with `broken`, whose message carries the same cause."""
    what = "wrong shard indexes %s" % (indexes,)
    net.start(2, 1, lambda k: jobs_for(indexes[k], 2, only=["ar32"]))
    try:
        procs = []
        t0 = time.time()
        for rank in range(WORKERS):
            env = dict(py_env(net, 1, 2, 1, timeout_ms=4000), RANK=str(rank))
            argv = ["timeout", "60", "/usr/bin/python3", os.path.join(HERE, "shard_worker.py"), "allreduce",
                    ",".join(map(str, KEYS)), "1", os.path.join(net.tmp, "wrong-%d.bin" % rank)]
            procs.append(net.popen(rank, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        outs = []
        for p in procs:
            so, se = p.communicate(timeout=90)
            line = so.strip().splitlines()[-1] if so.strip() else "{}"
            outs.append((p.returncode, json.loads(line), se))
        took = time.time() - t0
        check("%s: every rank fails at once (%.1f s, timeout 4 s): %s, naming the shard order" % (
            what, took, "/".join(r.get("code", "?") for _, r, _ in outs)),
              all(rc == 2 and r.get("code") in ("chunk_map", "broken") and SHARD_HINT in r.get("message", "")
                  for rc, r, _ in outs),
              "; ".join("exit %d %s %s" % (rc, r, se.strip()[-300:]) for rc, r, se in outs))
        print("    client's message: %s" % outs[0][1].get("message", "")[:330], flush=True)
        stats = server_stats(net, 2)
        drops = [livenet.job_of(s, "ar32")["drops"] for s in stats]
        wrong = [d.get("wrong_owner", 0) for d in drops]
        check("%s: the servers count the misdirected pushes as wrong_owner drops %s" % (what, wrong),
              all(w > 0 for w in wrong) if indexes[0] != 0 else (wrong[0] == 0 and wrong[1] > 0), json.dumps(drops))
    finally:
        net.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    livenet.unwind_on_sigterm()
    check = Checks()
    t0 = time.time()
    with ShardNet(WORKERS, 3, build_dir=args.build, memory_mb=256) as net:
        run_phase(check, net, "single", 1, 1)
        run_phase(check, net, "3x1", 3, 1)
        compare(check, net, "3x1")
        run_phase(check, net, "2x2", 2, 2)
        compare(check, net, "2x2")
        wrong_shard(check, net, (0, 0))
        wrong_shard(check, net, (1, 0))
    print("  (total %.1f s)" % (time.time() - t0), flush=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""DPDK test: phub under real-time priority (chrt -f, as systemd's CPUSchedulingPolicy gives it) never spins
while another task on its CPU waits for it (docs/server.md, "Real-time priority").
- Two phub-servers started at once under SCHED_FIFO, every thread of both on CPU 0, both come up: the EAL
  starts under SCHED_OTHER (at SCHED_FIFO its rte_ctrl_thread_create waits with 1 us naps that never give
  the CPU away, and two such processes on one CPU never finished starting).
- Their lcores run SCHED_FIFO and the EAL's own threads SCHED_OTHER.
- A server and phub-pktgen under SCHED_FIFO, all on CPU 0, with naps: a verified run.
- Refused, with the lcore and the setting named: a busy-polling lcore that shares its CPU (server and
  pktgen), a nap under the real-time floor. Busy-polling on a CPU of its own is taken.
"""
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import pktgen, procs, server, testing  # noqa: E402

CHRT = ("chrt", "-f", "10")
SCHED_OTHER, SCHED_FIFO = 0, 1
JOBS = [server.job(1, "rt", 2, 30000, secret="realtime-test-secret")]


def policies(pid):
    """{thread name: scheduling policy} of a running process (/proc/PID/task/*/stat field 41)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        out[name] = int(stat[stat.rindex(")") + 2:].split()[38])
    return out


def config(d, tag, cpu, backoff=True, polling=None):
    cfg = os.path.join(d, tag + ".lua")
    extra = {"polling": polling} if polling else None
    server.config(cfg, prefix="phubrt-" + tag, device=server.memif_device(os.path.join(d, tag + ".sock")),
                  jobs=JOBS, cpu=cpu, backoff=backoff, extra=extra)
    return cfg


def two_servers_on_one_cpu(a, t, d):
    tags = ["one-%d" % os.getpid(), "two-%d" % os.getpid()]
    with procs.Cleanup() as c:
        ps = []
        for tag in tags:
            c.add(prefix="phubrt-" + tag)
            argv = list(CHRT) + ["taskset", "-c", "0", a.server, "--config", config(d, tag, cpu=0), "--duration", "4"]
            ps.append(c.add(procs.Proc(argv, "phub-server " + tag)))
        up = [p.wait_for("phub: ready", 30) for p in ps]
        t.check("two servers under SCHED_FIFO, all threads on CPU 0, both ready within 30 s", all(up),
                "".join(p.stdout()[-1500:] + p.stderr()[-1500:] for p in ps))
        if all(up):
            pol = policies(ps[0].p.pid)
            lcores = {n: v for n, v in pol.items() if n.startswith("rte-worker")}
            t.check("its lcore threads run SCHED_FIFO", lcores and all(v == SCHED_FIFO for v in lcores.values()), str(pol))
            eal = {n: v for n, v in pol.items() if n.startswith(("eal-intr", "rte_mp"))}
            t.check("the EAL's own threads run SCHED_OTHER", eal and all(v == SCHED_OTHER for v in eal.values()), str(pol))
            t.check("its start-up says so", "real-time: SCHED_FIFO 10" in ps[0].stdout(), ps[0].stdout()[-1500:])
        for p in ps:
            t.equal("a server ends after its duration", p.wait(30), 0)


def verified_run_on_one_cpu(a, t):
    pair = testing.Pair(a, "rt-run", wrap=CHRT, gen_nap_us=50)
    try:
        pair.write(JOBS, cpu=0)
        status, summary, err, sstatus, counters, _ = pair.run(["--duration", "1.5"])
        t.equal("server and pktgen under SCHED_FIFO on CPU 0: pktgen exit status", status, 0)
        t.equal("... the server's exit status", sstatus, 0)
        step = summary["steps"][0] if summary else {}
        t.check("... rounds verified, no mismatch", bool(step) and step["jobs"][0]["rounds"] > 0 and
                step["jobs"][0]["mismatches"] == 0, err[-1500:])
        t.equal("... no server drop", counters.get("drops"), {})
    finally:
        pair.close()


def refused(a, t, d):
    cases = [("busy", 0, False, None, "lcore 1: polling.idle_sleep_us = 0 busy-polls"),
             ("short", 0, True, {"idle_polls_before_sleep": 100, "idle_sleep_us": 5},
              "lcore 1: polling.idle_sleep_us = 5 us is shorter than the 20 us")]
    for tag, cpu, backoff, polling, want in cases:
        tag = "%s-%d" % (tag, os.getpid())
        with procs.Cleanup() as c:
            c.add(prefix="phubrt-" + tag)
            status, out, err = procs.run(list(CHRT) + [a.server, "--config", config(d, tag, cpu, backoff, polling),
                                                       "--duration", "1"], 60)
            t.equal("server refused (%s): exit status" % tag.split("-")[0], status, 1)
            t.check("... the message names the lcore and the setting", want in err, err[-600:])
    # A busy poller with a CPU of its own (lcore 1 on CPU 1, the main lcore on CPU 0) is taken.
    tag = "own-%d" % os.getpid()
    with procs.Cleanup() as c:
        c.add(prefix="phubrt-" + tag)
        status, out, err = procs.run(list(CHRT) + [a.server, "--config", config(d, tag, 1, backoff=False),
                                                   "--duration", "1"], 60)
        t.equal("a busy-polling lcore on a CPU of its own at SCHED_FIFO runs: exit status", status, 0)
    # phub-pktgen: its lcore shares CPU 0 with its main lcore (pktgen.eal); a busy poller there is refused.
    prefix = "phubrt-gen-%d" % os.getpid()
    status, _, err = pktgen.run(a.pktgen, prefix=prefix, port="net_null0", timeout=60, wrap=CHRT,
                                args=["--server-ip", "198.18.0.1", "--job", "id=1,workers=2,keys=1000",
                                      "--duration", "0.2"])
    t.check("pktgen busy-polling at SCHED_FIFO on a shared CPU is refused, naming --idle-sleep-us",
            status != 0 and "--idle-sleep-us = 0 busy-polls" in err, "status %s: %s" % (status, err[-600:]))


def body(a, t):
    with tempfile.TemporaryDirectory(prefix="phub-rt-") as d:
        two_servers_on_one_cpu(a, t, d)
        refused(a, t, d)
    verified_run_on_one_cpu(a, t)


if __name__ == "__main__":
    sys.exit(testing.main("real-time priority: no spinning beside a waiting task", body))

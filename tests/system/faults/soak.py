#!/usr/bin/python3
"""The soak (issue 17, third part): for --minutes, one real phub-server (af_packet, one lcore) runs mixed jobs
while the fault matrix's faults come in rotation and its config is reloaded live; every result element is
verified by the workers (phub-demo-worker). Bed and faults: faults_test.py (same namespaces, same phases).

Each cycle runs one fault phase on worker namespaces 0 and 1 (the rotation: loss 0.1/1/5 %, dup, reorder,
corrupt, corrupt-crc, worker-kill, straggler, link-flap; the server restart is left out, it would reset what
the soak measures) while the background tenants run on namespaces 2 and 3 (after it, for the two corrupt
phases, which read the link's counters while it is quiet), each tenant with its own secret:
  ps-adam       ps mode, Adam, fresh weights each run, every update verified
  ps-momentum   ps mode, momentum + weight decay, mean
  det-bf16      allreduce, bf16, deterministic mean (bit-exact whatever the arrival order)
Then the config is reloaded (alternately by `phub-ctl reload FILE` and by SIGHUP on the rewritten file),
adding or removing job `extra`, which runs 50 verified rounds while it exists; and the server's idle state is
read after 1 s quiet: RSS (/proc) and the mbufs in use of each pool (`phub-ctl stats --json`).

Reports rounds completed, wrong results (mismatches), unexpected errors (failed checks; the errors a fault
is meant to cause, e.g. worker-kill's round_stalled, are counted apart), the memory high-water mark (RSS,
mbufs in use in any sample) and the drift between the first and the last cycle (mean round latency of
det-bf16 from the server's counters, idle RSS). Exit status 0 only if 0 wrong, no failed check, and no
leak: at the end, every pool back to the idle baseline (taken after every job ran once), and the idle RSS
within faults_test.RSS_BOUND_KIB of the idle RSS after the first rotation (the first reloads that add and
remove `extra` touch fresh DPDK heap pages: about 1.1 MiB over the first three cycles here, flat after).
Usage: soak.py --build BUILD_DIR --minutes M   (root; cleans up namespaces, processes, nft tables, also on
failure). tools/soak.sh is the command; meson's `soak` test runs 2 minutes.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import faults_test as ft  # noqa: E402
import livenet  # noqa: E402
from livenet import Checks, phubnet  # noqa: E402
from reload_test import Reloader  # noqa: E402

ADAM = dict(kind="adam", lr=0.01, beta1=0.9, beta2=0.99, eps=1e-6)
MOMENTUM = dict(kind="momentum", lr=0.05, momentum=0.9, weight_decay=0.01)
TENANTS = [phubnet.job(10, "ps-adam", 2, ft.KEYS, 45000, mode="ps", optimizer=ADAM, secret="tenant-a-soak-secret"),
           phubnet.job(11, "ps-momentum", 2, ft.KEYS, 45100, mode="ps", reduce="mean", optimizer=MOMENTUM,
                       secret="tenant-b-soak-secret"),
           phubnet.job(12, "det-bf16", 2, ft.KEYS, 45200, dtype="bf16", reduce="mean", deterministic=True,
                       secret="tenant-c-soak-secret")]
EXTRA = phubnet.job(13, "extra", 2, ft.KEYS, 45300, secret="tenant-d-soak-secret")
ROTATION = [ft.phase_loss, ft.phase_dup, ft.phase_reorder, ft.phase_corrupt, ft.phase_corrupt_crc, ft.phase_kill,
            ft.phase_straggler, ft.phase_flap]
BACKGROUND_NS = [2, 3]


class SoakReloader(Reloader):
    """Reload i: the faults' jobs and the tenants, with `extra` when i is even; by SIGHUP every other time."""

    def __call__(self, i, with_extra):
        jobs = ft.JOBS + TENANTS + ([EXTRA] if with_extra else [])
        text = self.net.config_text(jobs, round_stall_ms=ft.STALL_MS, settings=ft.SETTINGS)
        message = self.apply(text, i % 2 == 1, "soak-%04d.lua" % i)
        self.check("reload %d (%s, extra %s): %s" % (i, "SIGHUP" if i % 2 else "phub-ctl",
                                                     "added" if with_extra else "removed", message),
                   " applied: " in message)
        return self.last_path


def start_background(net):
    """The tenants' ranks on namespaces 2 and 3, bounded: the ps jobs by rounds, det-bf16 by time."""
    ps = ["--rounds", "150", "--fresh-weights", "--timeout-ms", "20000"]
    return {"ps-adam": ft.start(net, "ps-adam", BACKGROUND_NS, ps, timeout_s=90),
            "ps-momentum": ft.start(net, "ps-momentum", BACKGROUND_NS, ps, timeout_s=90),
            "det-bf16": ft.start(net, "det-bf16", BACKGROUND_NS, ["--seconds", "3", "--timeout-ms", "20000"],
                                 timeout_s=90)}


def latency_us(stats, name):
    """(rounds completed, sum of their latencies in us) of a job, from the server's counters."""
    j = livenet.job_of(stats, name)
    return (j["rounds_completed"], j["round_latency_sum_ns"] / 1000.0) if j else (0, 0.0)


class Totals:
    def __init__(self):
        self.rounds = self.wrong = self.expected_errors = 0
        self.per_job = {}

    def add_workers(self, name, results, check):
        self.rounds += ft.rounds_of(results)
        self.wrong += ft.wrong_of(results)
        self.per_job[name] = self.per_job.get(name, 0) + ft.rounds_of(results)
        ok, detail = livenet.workers_ok(results)
        check("%s: both ranks verify every element" % name, ok, detail)

    def add_faults(self, records):
        for fault, rounds, wrong, errors, _ in records:
            self.rounds += rounds
            self.wrong += wrong
            self.expected_errors += errors
            self.per_job["fault " + fault] = self.per_job.get("fault " + fault, 0) + rounds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--minutes", type=float, required=True)
    a = ap.parse_args()
    livenet.unwind_on_sigterm()
    check = Checks()
    if os.geteuid() != 0:
        print("soak: needs root (namespaces, af_packet, nftables)")
        return 1
    t0 = time.time()
    deadline = t0 + a.minutes * 60
    totals = Totals()
    cycles = []  # per cycle: (idle RSS KiB, det-bf16 mean round latency in us, mbufs in use at idle)
    run_s = int(a.minutes * 60 + 300)
    with phubnet.Net(4, build_dir=a.build, memory_mb=256, lcores=1) as net:
        net.start_server(ft.JOBS + TENANTS, round_stall_ms=ft.STALL_MS, settings=ft.SETTINGS, timeout_s=run_s)
        ctl = livenet.Ctl(net)
        reload = SoakReloader(net, ctl, check)
        ft.warm_up(check, net)
        for name, procs in start_background(net).items():
            totals.add_workers(name, ft.finish(procs, 120), check)
        baseline = ft.idle_state(net, 1.0)
        rss_high = baseline[0]
        print("soak: idle baseline after every job ran once: RSS %d KiB, mbufs in use %s" % baseline, flush=True)
        sampler = ft.Sampler(net, ft.METRICS_MS)
        try:
            i = 0
            while time.time() < deadline:
                phase = ROTATION[i % len(ROTATION)]
                mx = ft.Matrix(check, quiet=True)
                lat0 = latency_us(ctl.stats(), "det-bf16")
                # The corruption phases account for every corrupted frame with the server's link quiet at their
                # readings (frames lost in af_packet's ring are seen only as kernel rx minus port rx): the
                # tenants start after them in their cycles.
                quiet_phase = phase in (ft.phase_corrupt, ft.phase_corrupt_crc)
                bg = None if quiet_phase else start_background(net)
                try:
                    phase(check, mx, net, sampler)
                except Exception as e:  # a phase that breaks is a failure; the soak goes on
                    check("cycle %d: %s ran" % (i, phase.__name__), False, repr(e))
                bg = bg or start_background(net)
                for name, procs in bg.items():
                    totals.add_workers(name, ft.finish(procs, 120), check)
                totals.add_faults(mx.records)
                with_extra = i % 2 == 0
                path = reload(i, with_extra)
                if with_extra:
                    res = ft.finish(livenet.start_workers(net, "extra", BACKGROUND_NS, ["--rounds", "50",
                                                                                        "--timeout-ms", "20000"],
                                                          path, 60), 90)
                    totals.add_workers("extra", res, check)
                lat1 = latency_us(ctl.stats(), "det-bf16")
                rss, pools = ft.idle_state(net, 1.0)
                rss_high = max(rss_high, rss)
                mean = (lat1[1] - lat0[1]) / (lat1[0] - lat0[0]) if lat1[0] > lat0[0] else 0.0
                cycles.append((rss, mean, sum(pools.values())))
                print("soak: cycle %d %-16s %5.1f min  rounds %d  wrong %d  idle RSS %d KiB  mbufs in use %d  "
                      "det-bf16 round %.0f us  %s" % (i, phase.__name__[6:], (time.time() - t0) / 60, totals.rounds,
                                                     totals.wrong, rss, sum(pools.values()), mean,
                                                     " / ".join(mx.lines and [ln[6:40].strip() for ln in mx.lines])),
                      flush=True)
                i += 1
            # The last reload may have left `extra` configured: take it out, so that the end state compares with
            # the baseline's jobs (its retired memory must be freed too).
            if cycles and i % 2 == 1:
                reload(i, False)
            final = ft.idle_state(net, 2.0)
            rss_high = max(rss_high, final[0])
            # Pools against the baseline; RSS against the end of the first rotation (or the baseline, if the
            # run was shorter than one).
            reference = (cycles[len(ROTATION) - 1][0] if len(cycles) >= len(ROTATION) else baseline[0], baseline[1])
            no_leak = ft.check_no_leak(check, "soak end (%d cycles, 2 s quiet; RSS from the end of cycle %d)" % (
                len(cycles), min(len(cycles), len(ROTATION)) - 1), reference, final)
        finally:
            sampler.stop()
            if check.failed:
                print(open(net.server_log).read()[-2000:])
            net.stop_server()
    minutes = (time.time() - t0) / 60
    first, last = (cycles[0], cycles[-1]) if cycles else ((0, 0.0, 0), (0, 0.0, 0))
    rotation_end = cycles[min(len(cycles), len(ROTATION)) - 1] if cycles else first
    # Round time drift: det-bf16's mean round latency over the first k cycles and the last k (one cycle's is noisy).
    k = max(1, min(len(ROTATION), len(cycles) // 2))
    lat_first = sum(c[1] for c in cycles[:k]) / k if cycles else 0.0
    lat_last = sum(c[1] for c in cycles[-k:]) / k if cycles else 0.0
    print("soak: per job and fault, rounds: " + ", ".join("%s %d" % kv for kv in sorted(totals.per_job.items())))
    print("SOAK minutes %.1f  cycles %d  rounds %d  wrong %d  errors %d (expected from faults: %d)  "
          "RSS high %d KiB  mbufs in use high %d  drift: RSS %d (first cycle) / %d (first rotation) -> %d KiB, "
          "det-bf16 round %.0f -> %.0f us (first/last %d cycles)  leak %s"
          % (minutes, len(cycles), totals.rounds, totals.wrong, len(check.failed), totals.expected_errors, rss_high,
             sampler.mbufs_in_use_high, first[0], rotation_end[0], last[0], lat_first, lat_last, k,
             "no" if no_leak else "YES"),
          flush=True)
    rc = check.summary()
    return 0 if rc == 0 and totals.wrong == 0 and no_leak and cycles else 1


if __name__ == "__main__":
    sys.exit(main())

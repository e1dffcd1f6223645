#!/usr/bin/python3
"""100 reloads under traffic (issue 14), against the real phub-server on af_packet, workers in namespaces.

Jobs A and B run the whole time, two ranks of phub-demo-worker each, every result element verified by the
workers. Meanwhile 100 reloads, each with a new config file (`phub-ctl reload FILE`; every fourth by SIGHUP,
which reloads the file last applied after it was rewritten), cycle: change B's limits (rate_limit_pps,
quota_bytes); change them again and add job C; run C (two ranks, a few verified rounds); change B's limits and
remove C. Checked: every reload applied and changed B alone (besides adding or removing C); A's and B's workers
ran from before the first reload to after the last with every result verified; the server counted no drop
against A, and A kept its epoch; C worked each time it existed; no drop against C or D.

The server's lcore has CPU 1 to itself (EAL --lcores 0@0,1@1, busy-polling); the workers, phub-ctl and the
control thread share CPU 0. Each reload window (its reloads and C's run) is followed by a window without
reloads of the same length, in which job D (C's twin, configured throughout) runs the same way. The
loop-gap histogram's delta over the two kinds of windows is printed: its largest non-empty bucket against the
target of 100 us, and so is the longest single gap in microseconds (the lcores' max_gap_tsc, read before the
first reload and after the last). The target is asserted only if the windows without reloads stay within it, i.e. if this
machine lets the measurement mean something about the server; otherwise it is printed as a measurement.
Usage: reload_test.py --build BUILD_DIR   (root; removes namespaces, processes and files, also on failure)
"""
import os
import re
import signal
import sys
import time

import livenet
from livenet import phubnet

TARGET_US = 100
RELOADS = 100
KEYS = [20000, 3000, 1]
SMALL = [4096, 100]
A = phubnet.job(1, "A", 2, KEYS, 42100, secret="a-secret-0123456")
C = phubnet.job(3, "C", 2, SMALL, 42300)
D = phubnet.job(4, "D", 2, SMALL, 42400)
B_RATES = [0, 400000, 150000, 60000]  # packets per second; 0 = unlimited
B_QUOTAS = ["64MiB", "16MiB", "32MiB", "8MiB", "48MiB"]
SETTINGS = dict(control=dict(metrics_interval_ms=20))
POLLING = (0, 0)  # busy-poll: the lcore never sleeps, every loop iteration is a gap sample
C_ROUNDS = 10
# Each window is budgeted this long (reload and quiet windows alike); A and B run for all of them.
WINDOW_BUDGET_S = 1.3


def b_job(i):
    return phubnet.job(2, "B", 2, KEYS, 42200, rate_limit_pps=B_RATES[i % len(B_RATES)],
                       quota_bytes=B_QUOTAS[i % len(B_QUOTAS)])


def steps():
    """The reloads: (index, C present after it, C added by it, C removed by it)."""
    out = []
    for i in range(RELOADS):
        phase = i % 3
        out.append((i, phase == 1, phase == 1, phase == 2))
    return out


class Reloader:
    """Applies reload i by phub-ctl (a new file) or by SIGHUP (the last applied file, rewritten)."""

    def __init__(self, net, ctl, check):
        self.net, self.ctl, self.check = net, ctl, check
        self.last_path = net.config_path
        self.applied = 0
        self.messages = []  # one per reload, the server's outcome line
        self.failures = []

    def __call__(self, i, with_c):
        text = self.net.config_text([A, b_job(i + 1), D] + ([C] if with_c else []), polling=POLLING,
                                    settings=SETTINGS)
        by_signal = i % 4 == 3
        message = self.apply(text, by_signal, "reload-%03d.lua" % i)
        self.messages.append((i, "SIGHUP" if by_signal else "phub-ctl", message))
        if " applied: " not in message:
            self.failures.append((i, message))
        return message

    def apply(self, text, by_signal, file_name):
        """Reloads `text`: by SIGHUP (written over the last applied file) or by phub-ctl (a new file,
        file_name in the test's directory). The server's outcome line."""
        if by_signal:
            livenet.write(self.last_path, text)
            log_mark = os.path.getsize(self.net.server_log)
            self.net.signal_server(signal.SIGHUP)
            return self.wait_signal_outcome(log_mark)
        self.last_path = livenet.write(os.path.join(self.net.tmp, file_name), text)
        rc, out, err = self.ctl("reload", self.last_path)
        return out.strip() if rc == 0 else "exit %d: %s" % (rc, err.strip())

    def wait_signal_outcome(self, log_mark, timeout_s=30):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            with open(self.net.server_log) as f:
                f.seek(log_mark)
                for line in f.read().splitlines():
                    if line.startswith("phub: reload of "):
                        return line[len("phub: "):]
            time.sleep(0.01)
        return "no outcome in the server's log within %d s of SIGHUP" % timeout_s


def only_b_changed(message, added, removed):
    """The outcome names B alone as changed, and C as added or removed when it should be."""
    m = re.search(r"applied: added (\d+)(?: \(([^)]*)\))?, changed (\d+)(?: \(([^)]*)\))?, removed (\d+), "
                  r"unchanged (\d+)", message)
    if not m:
        return False
    want_unchanged = 2  # A and D
    return (m.group(1) == ("1" if added else "0") and (m.group(2) or "") == ("C" if added else "") and
            m.group(3) == "1" and m.group(4) == "B" and m.group(5) == ("1" if removed else "0") and
            m.group(6) == str(want_unchanged))


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    windows = 2 * (RELOADS // 3 + 1)
    run_s = int(3 + windows * WINDOW_BUDGET_S)
    with phubnet.Net(6, build_dir=build, lcores=1, lcore_map="0@0,1@1", worker_cpus="0") as net:
        net.start_server([A, b_job(0), D], timeout_s=run_s + 120, polling=POLLING, settings=SETTINGS)
        ctl = livenet.Ctl(net, pin="0")
        workers_cfg = livenet.write(os.path.join(net.tmp, "workers.lua"),
                                    net.config_text([A, b_job(0), C, D], polling=POLLING, settings=SETTINGS))
        epoch_a = None
        a_run = livenet.start_workers(net, "A", [0, 1], ["--seconds", str(run_s)], workers_cfg, run_s + 60)
        b_run = livenet.start_workers(net, "B", [2, 3], ["--seconds", str(run_s)], workers_cfg, run_s + 60)
        time.sleep(1.5)  # both jobs running, A's epoch started
        epoch_a = livenet.job_of(ctl.stats(), "A")["epoch"]

        reload = Reloader(net, ctl, check)
        c_runs, d_runs = [], []
        gaps = {"reload": None, "quiet": None}
        seconds = {"reload": 0.0, "quiet": 0.0}

        def add(kind, before, after, took):
            delta = [y - x for x, y in zip(before, after)]
            gaps[kind] = delta if gaps[kind] is None else [g + d for g, d in zip(gaps[kind], delta)]
            seconds[kind] += took

        t_first = time.time()
        first_stats = ctl.stats()
        sample = livenet.loop_gaps(first_stats)
        longest_before_us = livenet.max_gap_us(first_stats)
        window_start, ran_c = time.time(), False
        for i, with_c, added, removed in steps():
            reload(i, with_c)
            if added:
                c_runs.append(livenet.finish_workers(
                    livenet.start_workers(net, "C", [4, 5], ["--rounds", str(C_ROUNDS)], workers_cfg, 30), 40))
                ran_c = True
            if not (removed or i == RELOADS - 1):
                continue
            # The window ends with C removed (or with the last reload); an equal one without reloads follows.
            stats = ctl.stats()
            took = time.time() - window_start
            after = livenet.loop_gaps(stats)
            add("reload", sample, after, took)
            quiet_start = time.time()
            if ran_c:
                d_runs.append(livenet.finish_workers(
                    livenet.start_workers(net, "D", [4, 5], ["--rounds", str(C_ROUNDS)], workers_cfg, 30), 40))
            time.sleep(max(0.0, took - (time.time() - quiet_start)))
            sample_end = livenet.loop_gaps(ctl.stats())
            add("quiet", after, sample_end, time.time() - quiet_start)
            sample, window_start, ran_c = sample_end, time.time(), False
        t_last = time.time()
        a_alive = all(p.poll() is None for p in a_run + b_run)

        check("%d reloads applied (%d by phub-ctl, %d by SIGHUP)" % (
            RELOADS, sum(1 for _, how, _ in reload.messages if how == "phub-ctl"),
            sum(1 for _, how, _ in reload.messages if how == "SIGHUP")),
            len(reload.messages) == RELOADS and not reload.failures, "failed: %s" % reload.failures[:5])
        rc, status, _ = ctl("status")
        check("status counts %d applied, 0 refused" % RELOADS, "reloads: %d applied, 0 refused" % RELOADS in status,
              status.strip())
        wrong = [(i, m) for (i, _, m), (_, _, added, removed) in zip(reload.messages, steps())
                 if not only_b_changed(m, added, removed)]
        check("every reload changed B alone (and added or removed C)", not wrong, "%s" % wrong[:3])
        print("    first: %s" % reload.messages[0][2][:200])
        print("    last:  %s" % reload.messages[-1][2][:200])
        check("A and B ran through every reload (%.1f s of reloads, workers for %d s)" % (t_last - t_first, run_s),
              a_alive, "a worker of A or B ended before the last reload")

        ok, detail = livenet.workers_ok(livenet.finish_workers(a_run, run_s + 30))
        check("A: every round verified", ok, detail)
        print("    A " + detail)
        ok, detail = livenet.workers_ok(livenet.finish_workers(b_run, run_s + 30))
        check("B: every round verified", ok, detail)
        print("    B " + detail)
        bad_c = [(n, d) for n, d in ((n, livenet.workers_ok(r)) for n, r in enumerate(c_runs)) if not d[0]]
        check("C worked each time it existed (%d runs x 2 ranks x %d rounds)" % (len(c_runs), C_ROUNDS),
              len(c_runs) == RELOADS // 3 and not bad_c, "%s" % bad_c[:3])
        bad_d = [n for n, r in enumerate(d_runs) if not livenet.workers_ok(r)[0]]
        check("D (no reloads around it) worked each time (%d runs)" % len(d_runs), not bad_d, "%s" % bad_d[:3])

        time.sleep(0.1)
        stats = ctl.stats()
        ja, jb, jd = (livenet.job_of(stats, n) for n in "ABD")
        a_drops = {k: v for k, v in ja["drops"].items() if v}
        check("A: no drop counted against it (%d pushes, %d rounds)" % (ja["pushes"], ja["rounds_completed"]),
              not a_drops, "drops %s" % a_drops)
        check("A kept its epoch through the reloads", ja["epoch"] == epoch_a and ja["resets"] == 0,
              "epoch %s before, %s after" % (epoch_a, ja["epoch"]))
        d_drops = {k: v for k, v in jd["drops"].items() if v}
        check("D: no drop counted against it", not d_drops, "drops %s" % d_drops)
        b_drops = {k: v for k, v in jb["drops"].items() if v}
        print("    B's drops (its rate limit changed under it): %s" % (b_drops or "none"))
        check("C is gone after the last removal", livenet.job_of(stats, "C") is None, "jobs %s" % [
            j["name"] for j in stats["jobs"]])

        # Loop gaps: the largest non-empty bucket over the reload windows and over the quiet ones.
        worst = {k: livenet.largest_bucket(gaps[k]) for k in gaps}
        bounds = stats["loop_gap_bounds_us"]
        above = {k: sum(gaps[k][bounds.index(TARGET_US) + 1:]) for k in gaps}
        for k in ("reload", "quiet"):
            print("LOOP-GAP %-6s windows %5.1f s, %9d loops: longest gap in bucket %-12s %6d loops over %d us"
                  % (k, seconds[k], sum(gaps[k]), livenet.gap_bucket_name(stats, worst[k]), above[k], TARGET_US))
        # The longest single gap, in microseconds: max_gap_tsc holds the longest since the server started, so a
        # rise over the reload phase (reload and quiet windows) is that phase's longest gap.
        longest_us = livenet.max_gap_us(stats)
        print("LOOP-GAP longest %.0f us %s (%.0f us before the first reload; target %d us)" % (
            longest_us, "during the reload phase" if longest_us > longest_before_us else
            "before the reloads: none during them was longer", longest_before_us, TARGET_US))
        print("    histogram bounds (us) %s" % bounds)
        print("    reload windows %s" % gaps["reload"])
        print("    quiet windows  %s" % gaps["quiet"])
        meaningful = above["quiet"] == 0
        if meaningful:
            check("longest loop gap during reloads within the %d us target" % TARGET_US, above["reload"] == 0,
                  "%d loops over %d us" % (above["reload"], TARGET_US))
        else:
            print("MEASUREMENT ONLY: the windows without reloads already have %d loop gaps over %d us (the CPU is "
                  "shared with the kernel and other processes), so the %d us target is not asserted"
                  % (above["quiet"], TARGET_US, TARGET_US))
        if check.failed:
            print(open(net.server_log).read()[-3000:])
        net.stop_server()
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

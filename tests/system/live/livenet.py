"""What the namespace tests share (live, persist, attack): their start, phubnet's test bed
(tests/system/client), the boot tests' named checks, phub-ctl against the server's socket, config files for
reloads, workers started without waiting, and the lcores' loop-gap histogram."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client"))
sys.path.insert(0, os.path.join(HERE, "..", "boot"))
import phubnet  # noqa: E402,F401  (re-exported)
from checks import Checks, unwind_on_sigterm  # noqa: E402,F401


def begin():
    """The start every namespace test shares: `--build BUILD_DIR` from the command line, SIGTERM unwinding
    through the tests' clean-up, and the named checks, with a failed check when not root. Returns
    (build_dir, checks, is_root); a caller that is not root returns checks.summary()."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    unwind_on_sigterm()
    check = Checks()
    root = os.geteuid() == 0
    if not root:
        check("runs as root (namespaces, af_packet)", False)
    return a.build, check, root


class Ctl:
    """phub-ctl on the server's control socket (or on `socket`); pin = a CPU list for taskset (None: anywhere)."""

    def __init__(self, net, pin=None, socket=None):
        self.argv = ([] if pin is None else ["taskset", "-c", pin]) + [
            net.exe("tools/phub-ctl/phub-ctl"), "--socket", socket or os.path.join(net.tmp, "ctl.sock")]

    def __call__(self, *args, timeout_s=45):
        """(exit status, stdout, stderr); phub-ctl's own --timeout is below ours."""
        r = subprocess.run(self.argv + ["--timeout", str(timeout_s - 5)] + list(args), capture_output=True,
                           text=True, timeout=timeout_s)
        return r.returncode, r.stdout, r.stderr

    def stats(self):
        rc, out, err = self("stats", "--json")
        if rc != 0:
            raise RuntimeError("phub-ctl stats --json: exit %d: %s" % (rc, err.strip()))
        return json.loads(out)

    def config(self, show_secrets=False):
        rc, out, err = self("config", *(["--show-secrets"] if show_secrets else []))
        if rc != 0:
            raise RuntimeError("phub-ctl config: exit %d: %s" % (rc, err.strip()))
        return out


def job_of(stats, name):
    """One job's entry of `stats --json`, or None."""
    return next((j for j in stats["jobs"] if j["name"] == name), None)


def loop_gaps(stats):
    """Loop iterations per gap bucket, summed over the lcores."""
    return [sum(c) for c in zip(*(lc["loop_gaps_us"] for lc in stats["lcores"]))]


def max_gap_us(stats):
    """The longest loop gap any lcore has had since the server started (max_gap_tsc), in microseconds."""
    return max(lc["max_gap_tsc"] for lc in stats["lcores"]) * 1e6 / stats["tsc_hz"]


def gap_bucket_name(stats, b):
    bounds = stats["loop_gap_bounds_us"]
    if b < 0:
        return "none"
    lower = 0 if b == 0 else bounds[b - 1]
    return "%d-%d us" % (lower, bounds[b]) if b < len(bounds) else "over %d us" % bounds[-1]


def largest_bucket(delta):
    """Index of the largest non-empty bucket of a histogram delta, -1 if it is empty."""
    return max((b for b, n in enumerate(delta) if n > 0), default=-1)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def start_workers(net, name, namespaces, args, config_path, timeout_s):
    """phub-demo-worker rank r in worker namespace namespaces[r], not waited for."""
    procs = []
    for rank, ns in enumerate(namespaces):
        argv = ["timeout", str(timeout_s), net.exe("tools/phub-demo/phub-demo-worker"), "--config", config_path,
                "--job", name, "--rank", str(rank), "--server", phubnet.SERVER_IP] + list(args)
        procs.append(net.popen(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return procs


def finish_workers(procs, timeout_s):
    """[(exit status, summary fields, stderr)] of workers started by start_workers."""
    out = []
    for p in procs:
        so, se = p.communicate(timeout=timeout_s)
        out.append((p.returncode, phubnet.parse_summary(so), se.strip()))
    return out


def workers_ok(results):
    """True if every rank exited 0 with status OK and no mismatch; and a one-line account."""
    ok = bool(results) and all(rc == 0 and s.get("status") == "OK" and s.get("mismatches") == "0"
                               for rc, s, _ in results)
    detail = ", ".join("rank %d: exit %d %s rounds=%s mismatches=%s timeouts=%s%s" % (
        r, rc, s.get("status"), s.get("rounds"), s.get("mismatches"), s.get("timeouts"),
        "" if rc == 0 else " (%s)" % err[-200:]) for r, (rc, s, err) in enumerate(results))
    return ok, detail

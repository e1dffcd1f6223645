"""phub-pktgen runs: command lines, JSON summaries."""
import json
import os
import signal
import tempfile
import time

from . import procs


def eal(prefix, lcores=1, cpu=0):
    """EAL arguments: every lcore of the generator, its control lcore too, on CPU `cpu`, so that nothing of
    the generator runs on the CPU of what it measures."""
    workers = "1" if lcores == 1 else "(1-%d)" % lcores
    return ["--no-huge", "--no-pci", "-m", "512", "--file-prefix", prefix, "--lcores",
            "0@%d,%s@%d" % (cpu, workers, cpu), "--log-level", "lib.eal:warning"]


# phub-pktgen's exit status when the link came up but the server never answered ARP, under --linger (where
# the generator must not restart a memif port under a polling server): the harness may start both again.
ARP_UNANSWERED = 75


def run(exe, *, prefix, port, args, lcores=1, cpu=0, timeout=120, cleanup=None, before_exit=None, zero_copy=False,
        wrap=()):
    """Run phub-pktgen to completion; returns (status, summary dict or None, stderr).
    With `before_exit`, the generator keeps its port open after the run (--linger) until before_exit()
    has returned (e.g. the server was stopped): a memif peer leaving under a polling server can crash it.
    zero_copy: `port` is a memif client; it shares the generator's own mbuf memory with the peer instead of
    copying every frame in and out of the link's buffers (net_memif zero-copy=yes, which needs the EAL's
    memory in one file). Only the generator's side changes: the peer's (the measured side's) work is the same.
    `wrap` goes before the command (e.g. chrt -f 10)."""
    one = dict(exe=exe, prefix=prefix, port=port, args=args, lcores=lcores, cpu=cpu, zero_copy=zero_copy, wrap=wrap)
    if before_exit is not None:
        return run_together([one], timeout=timeout, before_exit=before_exit, cleanup=cleanup)[0]
    path = _json_path()
    try:
        status, _, err = procs.run(_argv(one, path), timeout)
        return status, _summary(path), err
    finally:
        _done(one["prefix"], path, cleanup)


def run_together(gens, *, timeout, before_exit, cleanup=None):
    """Run several phub-pktgen at once (e.g. one per port of a server whose lcores are split per port), each a
    dict of run()'s arguments (exe, prefix, port, args; lcores, cpu, zero_copy, wrap optional), with one
    deadline, `timeout` seconds from now. Several start their runs together: each holds once its link is up
    (--hold, "pktgen: ready") until all are ready (or have given up), then all get SIGUSR1 at once, so that
    their measured windows (each step's started_s and stopped_s) coincide but for their session joins. Each keeps its
    port open after its run (--linger) until every one has finished and before_exit() has returned (see run()).
    Returns [(status, summary dict or None, stderr)] in the order given."""
    paths = [_json_path() for _ in gens]
    started = []
    try:
        for g, path in zip(gens, paths):
            started.append(procs.Proc(_argv(g, path) + (["--hold"] if len(gens) > 1 else []) + ["--linger", "120"],
                                      "phub-pktgen"))
        deadline = time.time() + timeout
        if len(gens) > 1:
            for p in started:  # ready, or done (it gave up before the run: an unanswered ARP), or exited
                while (time.time() < deadline and p.p.poll() is None and
                       not p.wait_for("pktgen: ready", 0.05) and "pktgen: done" not in p.stderr()):
                    pass
            for p in started:
                if p.p.poll() is None:
                    p.p.send_signal(signal.SIGUSR1)
        for p in started:
            if not p.wait_for("pktgen: done", max(deadline - time.time(), 0)) and p.p.poll() is None:
                p.diagnose()
        before_exit()
        statuses = [p.stop(30) for p in started]
        return [(status, _summary(path), p.stderr()) for status, p, path in zip(statuses, started, paths)]
    finally:
        for p in started:  # only where before_exit raised: the others were stopped above
            if p.p.poll() is None:
                p.stop(30)
        for g, path in zip(gens, paths):
            _done(g["prefix"], path, cleanup)


def _json_path():
    fd, path = tempfile.mkstemp(prefix="phub-pktgen-", suffix=".json")
    os.close(fd)
    return path


def _argv(g, json_path):
    port = g["port"] + (",zero-copy=yes" if g.get("zero_copy") else "")
    return (list(g.get("wrap", ())) + [g["exe"]] + eal(g["prefix"], g.get("lcores", 1), g.get("cpu", 0))
            + (["--single-file-segments"] if g.get("zero_copy") else [])
            + ["--", "--port", port, "--json-file", json_path] + list(g["args"]))


def _summary(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _done(prefix, json_path, cleanup):
    os.unlink(json_path)
    procs.remove_runtime_dir(prefix)
    if cleanup is not None:
        cleanup.prefixes.append(prefix)


def offline(exe, args, timeout=120):
    """phub-pktgen without EAL (--write-pcap / --verify-pcap); returns (status, summary, stderr)."""
    status, out, err = procs.run([exe, "--json"] + list(args), timeout)
    try:
        return status, json.loads(out), err
    except ValueError:
        return status, None, err


def total(summary, key):
    """Sum of `key` over every step of a summary."""
    return sum(step.get(key, 0) for step in summary["steps"])

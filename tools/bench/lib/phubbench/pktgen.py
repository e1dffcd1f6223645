"""phub-pktgen runs: command lines, JSON summaries."""
import json
import os
import tempfile

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
    fd, path = tempfile.mkstemp(prefix="phub-pktgen-", suffix=".json")
    os.close(fd)
    try:
        if zero_copy:
            port += ",zero-copy=yes"
        argv = (list(wrap) + [exe] + eal(prefix, lcores, cpu) + (["--single-file-segments"] if zero_copy else [])
                + ["--", "--port", port, "--json-file", path] + list(args))
        if before_exit is None:
            status, _, err = procs.run(argv, timeout)
        else:
            p = procs.Proc(argv + ["--linger", "120"], "phub-pktgen")
            if not p.wait_for("pktgen: done", timeout) and p.p.poll() is None:
                p.diagnose()
            before_exit()
            status = p.stop(30)
            err = p.stderr()
        try:
            with open(path) as f:
                summary = json.load(f)
        except (OSError, ValueError):
            summary = None
        return status, summary, err
    finally:
        os.unlink(path)
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

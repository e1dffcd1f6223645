"""The DPDK tests' harness: named checks that print PASS/FAIL and the `SUBTESTS passed=N failed=M` line
tools/test/summarize.py counts, and a server + generator pair over net_memif."""
import argparse
import collections
import os
import signal
import sys
import tempfile

from . import pktgen, procs, server


class Checks:
    def __init__(self, title):
        self.title = title
        self.passed = self.failed = 0
        print("== %s" % title, flush=True)

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print("PASS %s" % name, flush=True)
        else:
            self.failed += 1
            print("FAIL %s%s" % (name, (": " + detail) if detail else ""), flush=True)
        return ok

    def equal(self, name, got, want):
        return self.check(name, got == want, "got %r, expected %r" % (got, want))

    def done(self):
        print("SUBTESTS passed=%d failed=%d" % (self.passed, self.failed), flush=True)
        return 0 if self.failed == 0 and self.passed > 0 else 1


def main(title, body):
    """Parse --server/--pktgen, run body(args, checks), print the summary line; returns the exit status.
    SIGTERM (meson's timeout) ends the test through SystemExit, so that every procs.Cleanup stops what it
    started: the servers and generators run in sessions of their own, which the signal does not reach."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit("FAIL: stopped by signal %d" % signum))
    a = args()
    t = Checks(title)
    body(a, t)
    return t.done()


def args():
    """--server and --pktgen executables (meson passes them); exits with a clear message if missing."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--pktgen", required=True)
    a = ap.parse_args()
    for exe in (a.server, a.pktgen):
        if not os.access(exe, os.X_OK):
            print("FAIL: %s is not built (run ninja first)" % exe)
            sys.exit(1)
    return a


class Pair:
    """phub-server and phub-pktgen joined by one net_memif link in a private temporary directory."""

    def __init__(self, a, name, lcores=1, gen_lcores=1, mtu=1500, wrap=(), gen_nap_us=10):
        """`wrap` goes before both commands (e.g. chrt -f 10); the generator naps `gen_nap_us` after its idle
        polls unless a run is `busy`."""
        self.a, self.name, self.lcores, self.gen_lcores, self.mtu = a, name, lcores, gen_lcores, mtu
        self.wrap, self.gen_nap_us = tuple(wrap), gen_nap_us
        self.dir = tempfile.mkdtemp(prefix="phub-%s-" % name)
        self.sock = os.path.join(self.dir, "memif.sock")
        self.cfg = os.path.join(self.dir, "server.lua")
        self.tag = "%s-%d" % (name, os.getpid())

    def write(self, jobs, backoff=True, **kw):
        return server.config(self.cfg, prefix="phubs-" + self.tag, device=server.memif_device(self.sock),
                             jobs=jobs, lcores=self.lcores, mtu=self.mtu, backoff=backoff, **kw)

    def run(self, gen_args, timeout=120, busy=False):
        """Start the server, run the generator against it, stop the server.
        Returns (pktgen status, summary or None, pktgen stderr, server status, server counters, server output).
        A memif link that comes up passing no ARP (pktgen.ARP_UNANSWERED) starts both sides once more."""
        r = self._run_once(gen_args, timeout, busy)
        if r[0] == pktgen.ARP_UNANSWERED and r[3] == 0:
            print("RETRY the memif link passed no ARP (DPDK 22.11, see tools/phub-pktgen/arp.cpp); the server "
                  "stopped cleanly; starting both again", flush=True)
            r = self._run_once(gen_args, timeout, busy)
        return r

    def _run_once(self, gen_args, timeout, busy):
        with procs.Cleanup() as c:
            srv = server.start(self.a.server, self.cfg, "phubs-" + self.tag, c, wrap=self.wrap)
            extra = [] if busy else ["--idle-sleep-us", str(self.gen_nap_us)]
            stopped = {}

            def stop_server():  # before the generator leaves the memif link (see pktgen.run)
                stopped["status"], stopped["counters"] = server.stop(srv)

            status, summary, err = pktgen.run(
                self.a.pktgen, prefix="phubg-" + self.tag, port=server.memif_device(self.sock, "client"),
                args=["--server-config", self.cfg, "--progress-ms", "2000"] + extra + list(gen_args), lcores=self.gen_lcores,
                timeout=timeout, cleanup=c, before_exit=stop_server, wrap=self.wrap)
            sstatus, counters = stopped["status"], stopped["counters"]
            output = srv.stdout() + srv.stderr()
        if status != 0:
            print("pktgen exited with %s; its stderr:\n%s" % (status, err[-3000:]), flush=True)
        if sstatus != 0:
            print("phub-server exited with %s; its output:\n%s" % (sstatus, output[-3000:]), flush=True)
        return status, summary, err, sstatus, counters, output

    def close(self):
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)


Result = collections.namedtuple("Result", "status summary err server_status counters server_output")


def run_pair(a, name, jobs, gen_args, lcores=1, gen_lcores=1, timeout=120):
    """A server with `jobs` and the generator run with `gen_args` against it, once (see Pair.run)."""
    pair = Pair(a, name, lcores, gen_lcores)
    try:
        pair.write(jobs)
        return Result(*pair.run(gen_args, timeout))
    finally:
        pair.close()

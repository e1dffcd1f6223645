#!/usr/bin/python3
"""Emulated racks of network-namespace hosts for phub tests (importable module and CLI).

Topology (addresses from 198.18.0.0/15 only):
  host namespaces  <pfx>-hR-I   eth0 198.18.R.(10+I)/24, default via 198.18.R.1
  rack routers     <pfx>-rR     bridge br0 198.18.R.1/24 joins the hosts; uplink "up" 198.19.R.1/30
  delay lines      <pfx>-dR     user-space delay line (delayline.cpp) forwarding between "dla" and "dlb"
  core router      <pfx>-core   "rR" 198.19.R.2/30 towards each rack
Host access links and rack uplinks are shaped with tbf in both directions; the uplink rate is
hosts_per_rack * access_rate / oversubscription. Each rack's delay line adds its own one-way delay,
so cross-rack RTT grows with the racks involved: RTT(R, S) ~ 2 * (delay_R + delay_S).
This kernel has no netem: delay comes from the delay line, rates from tbf.
Everything created is removed by down(), also when set-up fails or on SIGINT/SIGTERM.
"""
import argparse
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILY = "phtb"  # every namespace made here starts with this


def sh(*argv, check=True, capture=False, timeout=30):
    r = subprocess.run(argv, check=False, timeout=timeout, text=True,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s" % (r.returncode, " ".join(argv), r.stderr.strip()))
    return r.stdout if capture else r.returncode


def build_delayline(out_dir):
    """Compiles delayline.cpp into out_dir when missing or older than the source."""
    src = os.path.join(HERE, "delayline.cpp")
    exe = os.path.join(out_dir, "phub-delayline")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        os.makedirs(out_dir, exist_ok=True)
        cxx = shutil.which("c++") or shutil.which("g++")
        sh(cxx, "-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, src, timeout=300)
    return exe


def kernel_lacks():
    """Features the testbed needs that this kernel does not offer (empty list when all are there)."""
    missing = []
    probe = FAMILY + "probe%d" % os.getpid()
    try:
        sh("ip", "netns", "add", probe)
        sh("ip", "-n", probe, "link", "add", "t0", "type", "veth", "peer", "name", "t1")
        if sh("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "t0", "root", "tbf", "rate", "10mbit",
              "burst", "32kb", "latency", "50ms", check=False) != 0:
            missing.append("tbf qdisc")
        if sh("ip", "-n", probe, "link", "add", "b0", "type", "bridge", check=False) != 0:
            missing.append("bridge")
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return missing


class Testbed:
    def __init__(self, racks=3, hosts_per_rack=4, access_mbit=100.0, oversubscription=4.0,
                 delays_us=(100, 200, 400), jitter_us=0.0, build_dir=None, prefix=None):
        self.racks = racks
        self.hosts_per_rack = hosts_per_rack
        self.access_mbit = access_mbit
        self.uplink_mbit = hosts_per_rack * access_mbit / oversubscription
        self.delays_us = list(delays_us) + [delays_us[-1]] * max(0, racks - len(delays_us))
        self.jitter_us = jitter_us
        self.build_dir = build_dir or os.environ.get("PHUB_TESTBED_BUILD", "/tmp/phub-testbed-build")
        self.prefix = prefix or "%s%04x" % (FAMILY, os.getpid() & 0xFFFF)
        self.namespaces = []
        self.procs = []
        self.hosts = []  # ground truth: dicts with name, ns, addr, rack

    # -- naming -------------------------------------------------------------------------------
    def ns_host(self, r, i):
        return "%s-h%d-%d" % (self.prefix, r, i)

    def ns_rack(self, r):
        return "%s-r%d" % (self.prefix, r)

    def ns_delay(self, r):
        return "%s-d%d" % (self.prefix, r)

    def ns_core(self):
        return "%s-core" % self.prefix

    # -- helpers ------------------------------------------------------------------------------
    def _netns(self, name, router=False):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        sysctls = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                   "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"]
        if router:
            sysctls.append("net.ipv4.ip_forward=1")
        sh("ip", "netns", "exec", name, "sysctl", "-qw", *sysctls)

    def _shape(self, ns, dev, mbit):
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
           "rate", "%gmbit" % mbit, "burst", "64kb", "latency", "100ms")

    def exec_argv(self, ns, argv):
        return ["ip", "netns", "exec", ns] + list(argv)

    def popen(self, ns, argv, **kw):
        p = subprocess.Popen(self.exec_argv(ns, argv), **kw)
        self.procs.append(p)
        return p

    # -- life cycle ---------------------------------------------------------------------------
    def up(self):
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self):
        delayline = build_delayline(self.build_dir)
        core = self.ns_core()
        self._netns(core, router=True)
        for r in range(1, self.racks + 1):
            rack, dl = self.ns_rack(r), self.ns_delay(r)
            self._netns(rack, router=True)
            self._netns(dl)
            sh("ip", "-n", rack, "link", "add", "name", "br0", "type", "bridge")
            sh("ip", "-n", rack, "addr", "add", "198.18.%d.1/24" % r, "dev", "br0")
            sh("ip", "-n", rack, "link", "set", "dev", "br0", "up")
            for i in range(1, self.hosts_per_rack + 1):
                host = self.ns_host(r, i)
                self._netns(host)
                sh("ip", "-n", host, "link", "add", "name", "eth0", "type", "veth", "peer", "name", "h%d" % i, "netns", rack)
                addr = "198.18.%d.%d" % (r, 10 + i)
                sh("ip", "-n", host, "addr", "add", addr + "/24", "dev", "eth0")
                sh("ip", "-n", host, "link", "set", "dev", "eth0", "up")
                sh("ip", "-n", host, "route", "add", "default", "via", "198.18.%d.1" % r)
                sh("ip", "-n", rack, "link", "set", "dev", "h%d" % i, "master", "br0", "up")
                self._shape(host, "eth0", self.access_mbit)
                self._shape(rack, "h%d" % i, self.access_mbit)
                self.hosts.append({"name": "h%d-%d" % (r, i), "ns": host, "addr": addr, "rack": r})
            # Uplink: rack "up" -- [dla  delay line  dlb] -- core "rR".
            sh("ip", "-n", rack, "link", "add", "name", "up", "type", "veth", "peer", "name", "dla", "netns", dl)
            sh("ip", "-n", dl, "link", "add", "name", "dlb", "type", "veth", "peer", "name", "r%d" % r, "netns", core)
            for ns, dev in ((rack, "up"), (dl, "dla"), (dl, "dlb"), (core, "r%d" % r)):
                sh("ip", "-n", ns, "link", "set", "dev", dev, "up")
            sh("ip", "-n", rack, "addr", "add", "198.19.%d.1/30" % r, "dev", "up")
            sh("ip", "-n", core, "addr", "add", "198.19.%d.2/30" % r, "dev", "r%d" % r)
            sh("ip", "-n", rack, "route", "add", "default", "via", "198.19.%d.2" % r)
            sh("ip", "-n", core, "route", "add", "198.18.%d.0/24" % r, "via", "198.19.%d.1" % r)
            self._shape(rack, "up", self.uplink_mbit)
            self._shape(core, "r%d" % r, self.uplink_mbit)
            self.popen(dl, [delayline, "--a", "dla", "--b", "dlb", "--delay-us", str(self.delays_us[r - 1]),
                            "--jitter-us", str(self.jitter_us), "--seed", str(r)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_reachable()

    def reachable(self, src_ns, addr):
        """True if a TCP connect from src_ns to addr:9 gets any answer (a refusal proves the path works)."""
        code = ("import socket,sys\ns=socket.socket();s.settimeout(1)\n"
                "try:\n s.connect((sys.argv[1],9))\nexcept ConnectionRefusedError:\n sys.exit(0)\n"
                "except OSError:\n sys.exit(1)\nsys.exit(0)")
        return sh(*self.exec_argv(src_ns, ["/usr/bin/python3", "-c", code, addr]), check=False) == 0

    def _wait_reachable(self, timeout_s=15.0):
        """Waits until the first host reaches one host of every rack (ARP done, delay lines running)."""
        first = self.hosts[0]
        deadline = time.time() + timeout_s
        for t in [h for h in self.hosts if h["addr"].endswith(".11")]:
            while not self.reachable(first["ns"], t["addr"]):
                if time.time() > deadline:
                    raise RuntimeError("testbed: %s cannot reach %s" % (first["addr"], t["addr"]))
                time.sleep(0.2)

    def down(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        for ns in reversed(self.namespaces):
            delete_netns(ns)
        self.namespaces = []

    def __enter__(self):
        install_signal_cleanup()
        atexit.register(self.down)
        return self.up()

    def __exit__(self, *exc):
        self.down()
        atexit.unregister(self.down)
        return False

    def ground_truth(self):
        return {"hosts": self.hosts, "access_mbit": self.access_mbit, "uplink_mbit": self.uplink_mbit,
                "delays_us": self.delays_us[:self.racks], "prefix": self.prefix}


def install_signal_cleanup():
    """SIGTERM/SIGINT raise SystemExit so that `with Testbed()` and finally blocks run."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def delete_netns(name):
    """Kills whatever still runs in the namespace, then deletes it (and with it its interfaces)."""
    for pid in (sh("ip", "netns", "pids", name, check=False, capture=True) or "").split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    sh("ip", "netns", "del", name, check=False)


def cleanup_all():
    """Removes every namespace of this family (left behind by a killed run)."""
    for line in sh("ip", "netns", "list", capture=True, check=False).splitlines():
        if line.split() and line.split()[0].startswith(FAMILY):
            delete_netns(line.split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["demo", "cleanup"])
    ap.add_argument("--racks", type=int, default=3)
    ap.add_argument("--hosts-per-rack", type=int, default=4)
    ap.add_argument("--access-mbit", type=float, default=100.0)
    ap.add_argument("--oversubscription", type=float, default=4.0)
    ap.add_argument("--seconds", type=float, default=0, help="demo: keep the testbed up this long")
    a = ap.parse_args()
    if a.command == "cleanup":
        cleanup_all()
        return 0
    with Testbed(a.racks, a.hosts_per_rack, a.access_mbit, a.oversubscription) as tb:
        print(json.dumps(tb.ground_truth(), indent=1))
        for h in tb.hosts[1:]:
            print("%s -> %s (rack %d): %s" % (tb.hosts[0]["addr"], h["addr"], h["rack"],
                                              "reachable" if tb.reachable(tb.hosts[0]["ns"], h["addr"]) else "NO PATH"))
        time.sleep(a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

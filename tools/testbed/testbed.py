#!/usr/bin/python3
"""Emulated racks of network-namespace hosts for phub tests (importable module and CLI).

Topology (addresses from 198.18.0.0/15 only; nothing is reachable from the root namespace):
  host namespaces  <pfx>-hR-I    eth0 198.18.R.(10+I)/24, default via 198.18.R.1      (I = 1..hosts_per_rack)
  hub namespaces   <pfx>-hubR-J  eth0 198.18.R.(1+J)/24, default via 198.18.R.1       (J = 1..hubs_per_rack <= 8)
                                 hub 1 of rack R is always 198.18.R.2: where a rack's phub-server runs
  rack routers     <pfx>-rR      bridge br0 198.18.R.1/24 joins the hosts ("hI") and hubs ("hubJ");
                                 uplink "up" 198.19.R.1/30; proxy ARP on br0, so a hub whose address is
                                 given as /15 reaches the hubs of other racks by ARP through the router
  delay lines      <pfx>-dR      user-space delay line (delayline.cpp) forwarding between "dla" and "dlb"
  core router      <pfx>-core    "rR" 198.19.R.2/30 towards each rack (its rack-facing interfaces)
Host access links and rack uplinks are shaped with tbf in both directions; the uplink rate is
hosts_per_rack * access_rate / oversubscription. Hub links are shaped at hub_mbit (default: the rack's
hosts together, hosts_per_rack * access_rate). Each rack's delay line adds its own one-way delay, so
cross-rack RTT grows with the racks involved: RTT(R, S) ~ 2 * (delay_R + delay_S).

This kernel has no netem: delay comes from the delay line, rates from tbf, and loss and duplication on the
core from nftables in the core namespace (one netdev table "phtb_core", which dies with the namespace):
  loss  `numgen random mod 10000 < K drop` with K = 100 * percent (0.01 % steps). direction "in" drops
        frames entering the core from a rack, so every frame that crosses the core meets the loss once, in
        either direction of traffic; "out" drops frames leaving the core towards a rack; "both" does both
        (a cross-rack frame then meets it twice: about 2 * percent).
  dup   `numgen random mod 10000 < K dup to rR` on rR's egress hook: frames leaving the core towards a rack
        are duplicated with that probability (a copy passes the hook again: p / (1 - p) extra copies).
A phub-server on DPDK (net_af_packet on the hub's "eth0") owns the hub's address itself: release_hub_address()
takes the kernel's address away first, and host_offloads=False makes the hosts send finished UDP checksums
and no UDP GSO super-packets, which an af_packet server cannot take.

API (Testbed):
  Testbed(racks, hosts_per_rack, access_mbit, oversubscription, delays_us, jitter_us, build_dir, prefix,
          hubs_per_rack=1, hub_mbit=None, core_loss_pct=0.0, core_loss_direction="in", core_dup_pct=0.0,
          host_offloads=True); use it as a context manager (or up() / down()).
  .hosts, .hubs       ground truth: dicts name, ns, addr, rack (hubs also "index")
  .hub(r, j=1)        one hub's dict; hub_addr(r, j=1) its address without building anything
  .set_core_loss(percent, direction="in"), .set_core_dup(percent)   0 removes the rule (and the table)
  .core_counters()    {"rR": {rx_bytes, rx_packets, tx_bytes, tx_packets, rx_dropped, tx_dropped}} from
                      `ip -s -j link` in the core namespace: what crossed each rack-facing interface
  .core_rule_counters()  {"rR": {"in": n, "out": n, "dup": n}}: frames the nftables rules dropped or duplicated
  .ground_truth()     hosts, hubs, core (interfaces, loss, duplication), rates, delays, prefix
  .leaks()            after down(): this testbed's namespaces still listed, processes still in its namespaces,
                      nftables tables of the family in the root namespace (all empty when torn down cleanly)
  .release_hub_address(r, j=1), .exec_argv(ns, argv), .popen(ns, argv) (stopped by down()),
  .reachable(ns, addr, tries=1), .nft_tables(ns=None)
Module: kernel_lacks(nft=False) (what this kernel misses; nft=True adds the core's loss and duplication),
core_counters(core_ns, racks) (the method's figures from anywhere, by the core's name),
processes_in(netns_inodes), delete_netns(name), cleanup_all(), build_delayline(dir), hub_addr(r, j=1).
Everything created is removed by down(), also when set-up fails, on an exception inside `with`, and on
SIGINT/SIGTERM (turned into SystemExit; down() runs with both signals blocked, so a second one cannot cut it
short). cleanup_all() (CLI: `testbed.py cleanup`) removes every namespace of the family "phtb", including
those of other runs still going: it is for what a killed run left behind.
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


def kernel_lacks(nft=False):
    """Features the testbed needs that this kernel does not offer (empty list when all are there); with nft, also
    what core loss and duplication need: the nft tool, netdev ingress and egress hooks, numgen, dup."""
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
        if nft and not shutil.which("nft"):
            missing.append("nft (apt-get install nftables)")
        elif nft:
            for hook, verdict in (("ingress", "drop"), ("egress", "drop"), ("egress", 'dup to "t0"')):
                script = ("table netdev p {\n chain c {\n  type filter hook %s device \"t0\" priority 0; policy accept;\n"
                          "  numgen random mod 10000 < 1 %s\n }\n}\ndelete table netdev p\n" % (hook, verdict))
                r = subprocess.run(["ip", "netns", "exec", probe, "nft", "-f", "-"], input=script, text=True,
                                   capture_output=True, timeout=30)
                if r.returncode != 0:
                    missing.append("nftables netdev %s hook with numgen and %s (%s)" % (hook, verdict, r.stderr.strip()))
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return missing


def hub_addr(r, j=1):
    """The address of hub j of rack r (1-based both): 198.18.r.(1+j); hub 1 is 198.18.r.2."""
    return "198.18.%d.%d" % (r, 1 + j)


NFT_TABLE = "phtb_core"  # the core's nftables table (netdev family, inside the core namespace)


def _rule_k(percent, what):
    """numgen threshold out of 10000 for a percentage (0.01 % resolution); refuses what it cannot model."""
    k = round(float(percent) * 100)
    if not 0 <= k <= 10000 or abs(k - float(percent) * 100) > 1e-6:
        raise ValueError("%s %r%%: must be within 0..100 in steps of 0.01" % (what, percent))
    return k


class Testbed:
    def __init__(self, racks=3, hosts_per_rack=4, access_mbit=100.0, oversubscription=4.0,
                 delays_us=(100, 200, 400), jitter_us=0.0, build_dir=None, prefix=None, hubs_per_rack=1,
                 hub_mbit=None, core_loss_pct=0.0, core_loss_direction="in", core_dup_pct=0.0, host_offloads=True):
        if not 0 <= hubs_per_rack <= 8:
            raise ValueError("hubs_per_rack %d: 0..8 (hub addresses 198.18.R.2-9)" % hubs_per_rack)
        if not 1 <= racks <= 250 or not 1 <= hosts_per_rack <= 240:
            raise ValueError("racks 1..250, hosts_per_rack 1..240")
        self.racks = racks
        self.hosts_per_rack = hosts_per_rack
        self.hubs_per_rack = hubs_per_rack
        self.access_mbit = access_mbit
        self.uplink_mbit = hosts_per_rack * access_mbit / oversubscription
        self.hub_mbit = hub_mbit or hosts_per_rack * access_mbit
        self.delays_us = list(delays_us) + [delays_us[-1]] * max(0, racks - len(delays_us))
        self.jitter_us = jitter_us
        self.host_offloads = host_offloads
        self.build_dir = build_dir or os.environ.get("PHUB_TESTBED_BUILD", "/tmp/phub-testbed-build")
        self.prefix = prefix or "%s%04x" % (FAMILY, os.getpid() & 0xFFFF)
        if not self.prefix.startswith(FAMILY):
            raise ValueError("prefix %r must start with %r (cleanup_all finds the family by it)" % (self.prefix, FAMILY))
        self.core_loss = (_rule_k(core_loss_pct, "core loss") / 100, core_loss_direction)
        self.core_dup = _rule_k(core_dup_pct, "core duplication") / 100
        self.namespaces = []
        self.netns_ids = {}  # namespace -> inode of its network namespace (leaks() finds processes by it)
        self.procs = []
        self.hosts = []  # ground truth: dicts with name, ns, addr, rack
        self.hubs = []  # ground truth: dicts with name, ns, addr, rack, index
        self.nft_table_made = False

    # -- naming -------------------------------------------------------------------------------
    def ns_host(self, r, i):
        return "%s-h%d-%d" % (self.prefix, r, i)

    def ns_hub(self, r, j=1):
        return "%s-hub%d-%d" % (self.prefix, r, j)

    def ns_rack(self, r):
        return "%s-r%d" % (self.prefix, r)

    def ns_delay(self, r):
        return "%s-d%d" % (self.prefix, r)

    def ns_core(self):
        return "%s-core" % self.prefix

    def hub(self, r, j=1):
        return next(h for h in self.hubs if h["rack"] == r and h["index"] == j)

    # -- helpers ------------------------------------------------------------------------------
    def _netns(self, name, router=False):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        self.netns_ids[name] = os.stat("/run/netns/" + name).st_ino
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
        atexit.register(self.down)
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _attach(self, rack, r, ns, port, addr, mbit, offloads):
        """A namespace on rack r's bridge: its "eth0" (addr/24, default via the rack router) to bridge port `port`."""
        sh("ip", "-n", ns, "link", "add", "name", "eth0", "type", "veth", "peer", "name", port, "netns", rack)
        sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "dev", "eth0", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", "198.18.%d.1" % r)
        sh("ip", "-n", rack, "link", "set", "dev", port, "master", "br0", "up")
        if not offloads:
            # Finished UDP checksums and no UDP GSO: what an af_packet (DPDK) receiver can take.
            sh("ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off", "tx-udp-segmentation", "off")
        self._shape(ns, "eth0", mbit)
        self._shape(rack, port, mbit)

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
            # Proxy ARP: a hub whose port claims all racks' subnets (198.18.0.0/15) reaches peer hubs in other
            # racks through the rack router; hosts (/24) never ask it for an address of their own subnet.
            # proxy_delay 0: the answer at once, not after the kernel's random delay of up to 0.8 s.
            sh("ip", "netns", "exec", rack, "sysctl", "-qw", "net.ipv4.conf.br0.proxy_arp=1",
               "net.ipv4.neigh.br0.proxy_delay=0")
            for i in range(1, self.hosts_per_rack + 1):
                host = self.ns_host(r, i)
                self._netns(host)
                addr = "198.18.%d.%d" % (r, 10 + i)
                self._attach(rack, r, host, "h%d" % i, addr, self.access_mbit, self.host_offloads)
                self.hosts.append({"name": "h%d-%d" % (r, i), "ns": host, "addr": addr, "rack": r})
            for j in range(1, self.hubs_per_rack + 1):
                hub = self.ns_hub(r, j)
                self._netns(hub)
                self._attach(rack, r, hub, "hub%d" % j, hub_addr(r, j), self.hub_mbit, False)
                self.hubs.append({"name": "hub%d-%d" % (r, j), "ns": hub, "addr": hub_addr(r, j), "rack": r,
                                  "index": j, "gateway": "198.18.%d.1" % r, "iface": "eth0"})
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
        if self.core_loss[0] or self.core_dup:
            self._apply_core_rules()
        self._wait_reachable()

    # -- the core's loss and duplication ------------------------------------------------------------
    def set_core_loss(self, percent, direction="in"):
        """Drops frames on every rack-facing interface of the core with this probability (see the module's
        docstring for the directions); 0 removes the rule."""
        self.core_loss = (_rule_k(percent, "core loss") / 100, direction)
        self._apply_core_rules()

    def set_core_dup(self, percent):
        """Duplicates frames leaving the core towards every rack with this probability; 0 removes the rule."""
        self.core_dup = _rule_k(percent, "core duplication") / 100
        self._apply_core_rules()

    def _apply_core_rules(self):
        """Replaces the core's nftables table in one transaction (no table at all when nothing is set)."""
        loss, direction = self.core_loss
        if direction not in ("in", "out", "both"):
            raise ValueError("core loss direction %r: in, out or both" % direction)
        k_loss, k_dup = _rule_k(loss, "core loss"), _rule_k(self.core_dup, "core duplication")
        chains = []
        for r in range(1, self.racks + 1):
            dev = "r%d" % r
            ingress, egress = [], []
            if k_loss and direction in ("in", "both"):
                ingress.append("numgen random mod 10000 < %d counter drop comment \"loss\"" % k_loss)
            if k_loss and direction in ("out", "both"):
                egress.append("numgen random mod 10000 < %d counter drop comment \"loss\"" % k_loss)
            if k_dup:
                egress.append("numgen random mod 10000 < %d counter dup to \"%s\" comment \"dup\"" % (k_dup, dev))
            for hook, rules in (("ingress", ingress), ("egress", egress)):
                if rules:
                    chains.append("  chain %s_%s {\n    type filter hook %s device \"%s\" priority 0; policy accept;\n"
                                  "%s  }\n" % (hook, dev, hook, dev, "".join("    %s\n" % x for x in rules)))
        # "table X" then "delete table X" removes an old table whether or not one exists, in the same batch.
        if not chains and not self.nft_table_made:
            return
        script = "table netdev %s\ndelete table netdev %s\n" % (NFT_TABLE, NFT_TABLE)
        if chains:
            script += "table netdev %s {\n%s}\n" % (NFT_TABLE, "".join(chains))
        r = subprocess.run(self.exec_argv(self.ns_core(), ["nft", "-f", "-"]), input=script, text=True,
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("nft in %s failed (%d): %s\n%s" % (self.ns_core(), r.returncode, r.stderr.strip(), script))
        self.nft_table_made = bool(chains)

    def core_rule_counters(self):
        """{"rR": {"in": dropped entering, "out": dropped leaving, "dup": duplicated}} from the rules' counters."""
        out = {"r%d" % r: {"in": 0, "out": 0, "dup": 0} for r in range(1, self.racks + 1)}
        text = sh(*self.exec_argv(self.ns_core(), ["nft", "-j", "list", "ruleset"]), capture=True)
        for item in json.loads(text)["nftables"]:
            rule = item.get("rule")
            if not rule or rule.get("table") != NFT_TABLE:
                continue
            hook, dev = rule["chain"].split("_", 1)
            packets = next((e["counter"]["packets"] for e in rule["expr"] if "counter" in e), 0)
            kind = "dup" if rule.get("comment") == "dup" else ("in" if hook == "ingress" else "out")
            out[dev][kind] += packets
        return out

    def nft_tables(self, ns=None):
        """Names of the nftables tables in namespace ns (None: the root namespace), as "family name"."""
        argv = ["nft", "list", "tables"] if ns is None else self.exec_argv(ns, ["nft", "list", "tables"])
        return [" ".join(line.split()[1:]) for line in sh(*argv, capture=True).splitlines() if line.startswith("table")]

    def core_counters(self):
        """Per rack-facing interface of the core: {"rR": {rx_bytes, rx_packets, tx_bytes, tx_packets, rx_dropped,
        tx_dropped}} (rx: from the rack into the core; tx: from the core to the rack; frame bytes)."""
        return core_counters(self.ns_core(), self.racks)

    # -- hubs ---------------------------------------------------------------------------------------
    def release_hub_address(self, r, j=1):
        """Takes the kernel's address (and so its default route) off hub j of rack r's "eth0", for a DPDK server
        (net_af_packet on "eth0") that answers for the address itself. Returns the hub's dict."""
        h = self.hub(r, j)
        sh("ip", "-n", h["ns"], "addr", "flush", "dev", "eth0")
        return h

    def reachable(self, src_ns, addr, tries=1):
        """True if a TCP connect from src_ns to addr:9 gets any answer (a refusal proves the path works) within
        `tries` attempts of 1 s each."""
        code = ("import socket,sys\ns=socket.socket();s.settimeout(1)\n"
                "try:\n s.connect((sys.argv[1],9))\nexcept ConnectionRefusedError:\n sys.exit(0)\n"
                "except OSError:\n sys.exit(1)\nsys.exit(0)")
        return any(sh(*self.exec_argv(src_ns, ["/usr/bin/python3", "-c", code, addr]), check=False) == 0
                   for _ in range(tries))

    def _wait_reachable(self, timeout_s=15.0):
        """Waits until the first host reaches one host and every hub of every rack (ARP done, delay lines running)."""
        first = self.hosts[0]
        deadline = time.time() + timeout_s
        for t in [h for h in self.hosts if h["addr"].endswith(".11")] + self.hubs:
            while not self.reachable(first["ns"], t["addr"]):
                if time.time() > deadline:
                    raise RuntimeError("testbed: %s cannot reach %s" % (first["addr"], t["addr"]))
                time.sleep(0.2)

    def down(self):
        """Stops the processes started here and deletes the namespaces (with their links, qdiscs and nftables
        tables). Idempotent; SIGINT and SIGTERM wait until it is done."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
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
            atexit.unregister(self.down)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def leaks(self):
        """What is left of this testbed (call after down()): {"namespaces": [...], "processes": [pid, ...] still
        in one of its network namespaces, "root_nft_tables": [...] of the family in the root namespace}."""
        listed = [line.split()[0] for line in sh("ip", "netns", "list", capture=True).splitlines() if line.split()]
        return {"namespaces": [n for n in listed if n == self.prefix or n.startswith(self.prefix + "-")],
                "processes": processes_in(self.netns_ids.values()),
                "root_nft_tables": [t for t in self.nft_tables() if t.split()[-1].startswith(FAMILY)]}

    def __enter__(self):
        install_signal_cleanup()
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False

    def ground_truth(self):
        loss, direction = self.core_loss
        core = {"ns": self.ns_core(), "loss_pct": loss, "loss_direction": direction, "dup_pct": self.core_dup,
                "nft_table": "netdev " + NFT_TABLE,
                "interfaces": {"r%d" % r: {"rack": r, "addr": "198.19.%d.2/30" % r, "peer": "198.19.%d.1" % r}
                               for r in range(1, self.racks + 1)}}
        return {"hosts": self.hosts, "hubs": self.hubs, "core": core, "access_mbit": self.access_mbit,
                "uplink_mbit": self.uplink_mbit, "hub_mbit": self.hub_mbit,
                "delays_us": self.delays_us[:self.racks], "prefix": self.prefix}


def core_counters(core_ns, racks):
    """Testbed.core_counters() for a testbed known only by its core namespace and rack count (e.g. from a
    process inside one of its hosts: `ip -n` enters the core's namespace by name)."""
    links = json.loads(sh("ip", "-n", core_ns, "-s", "-j", "link", "show", capture=True))
    out = {}
    for link in links:
        if link["ifname"] in ["r%d" % r for r in range(1, racks + 1)]:
            st = link["stats64"]
            out[link["ifname"]] = {"%s_%s" % (d, k): st[d][k] for d in ("rx", "tx")
                                   for k in ("bytes", "packets", "dropped")}
    return out


def install_signal_cleanup():
    """SIGTERM/SIGINT raise SystemExit so that `with Testbed()` and finally blocks run."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def processes_in(netns_inodes):
    """Pids of the processes whose network namespace is one of these (inodes of /run/netns/NAME): what keeps a
    namespace alive after `ip netns del`."""
    inodes, pids = set(netns_inodes), []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat("/proc/%s/ns/net" % pid).st_ino in inodes:
                    pids.append(int(pid))
            except OSError:
                pass
    return pids


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
    ap.add_argument("--hubs-per-rack", type=int, default=1)
    ap.add_argument("--access-mbit", type=float, default=100.0)
    ap.add_argument("--oversubscription", type=float, default=4.0)
    ap.add_argument("--core-loss-pct", type=float, default=0.0)
    ap.add_argument("--core-loss-direction", choices=["in", "out", "both"], default="in")
    ap.add_argument("--core-dup-pct", type=float, default=0.0)
    ap.add_argument("--prefix", help="namespace prefix (must start with %s; default from the pid)" % FAMILY)
    ap.add_argument("--seconds", type=float, default=0, help="demo: keep the testbed up this long")
    a = ap.parse_args()
    if a.command == "cleanup":
        cleanup_all()
        return 0
    with Testbed(a.racks, a.hosts_per_rack, a.access_mbit, a.oversubscription, prefix=a.prefix,
                 hubs_per_rack=a.hubs_per_rack, core_loss_pct=a.core_loss_pct,
                 core_loss_direction=a.core_loss_direction, core_dup_pct=a.core_dup_pct) as tb:
        print(json.dumps(tb.ground_truth(), indent=1))
        for h in tb.hosts[1:] + tb.hubs:
            print("%s -> %s %s (rack %d): %s" % (tb.hosts[0]["addr"], h["name"], h["addr"], h["rack"],
                                                 "reachable" if tb.reachable(tb.hosts[0]["ns"], h["addr"], 3)
                                                 else "NO PATH"), flush=True)
        print("up", flush=True)
        time.sleep(a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

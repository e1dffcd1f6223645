#!/usr/bin/python3
"""DPDK test: phub-pktgen is not tied to memif. Inside a network namespace of its own, the real phub-server
and the generator exchange verified rounds over kernel-visible links, two lcores and two queue pairs each:
- net_af_packet on both ends of a veth pair;
- net_tap on the server (its kernel interface) and net_af_packet on that interface for the generator.
Every result must verify and rounds must complete. The server may drop only what a kernel link explains:
the kernel's own chatter on the interface (not_for_us) and, after the generator retransmitted, late copies
of pushes whose round had completed (round_behind)."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import pktgen, procs, server, testing  # noqa: E402

NS = "phubpg%d" % os.getpid()
ROUNDS = 20


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True, timeout=30)


def in_ns(d, exe, name):
    """A wrapper that runs `exe` inside the test's namespace (exec keeps the pid, so signals reach it)."""
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n" % (NS, exe))
    os.chmod(path, 0o755)
    return path


def run(a, t, d, label, server_dev, gen_dev):
    tag = "%s-%d" % (label, os.getpid())
    cfg = os.path.join(d, label + ".lua")
    jobs = [server.job(1, "kl-sum", 4, 40000, secret="kl-1", reduce="mean"),
            server.job(2, "kl-ps", 2, 12000, dtype="bf16", mode="ps", optimizer={"kind": "momentum", "lr": 0.05})]
    server.config(cfg, prefix="phubs-" + tag, device=server_dev, jobs=jobs, lcores=2, cpu=[1, 0],
                  extra={"ports": [{"name": "p0", "device": server_dev, "ipv4": "198.18.0.1/24", "mtu": 1500,
                                    "rx_desc": 512, "tx_desc": 512, "steering": "ring"}]})
    with procs.Cleanup() as c:
        srv = server.start(in_ns(d, a.server, "server.sh"), cfg, "phubs-" + tag, c)
        if label == "tap":  # the tap exists once the server runs: bring it up for the generator's socket
            sh("ip netns exec %s ip link set phubtap0 up" % NS)
        stopped = {}

        def stop_server():
            stopped["r"] = server.stop(srv)

        status, s, err = pktgen.run(in_ns(d, a.pktgen, "pktgen.sh"), prefix="phubg-" + tag, port=gen_dev,
                                    args=["--server-config", cfg, "--rounds", str(ROUNDS), "--duration", "30", "--rto-ms", "20",
                                          "--idle-sleep-us", "10", "--progress-ms", "0"],
                                    lcores=2, timeout=90, cleanup=c, before_exit=stop_server)
        sstatus, counters = stopped["r"]
    if status != 0:
        print(err[-3000:])
    t.equal("%s: pktgen exit status" % label, status, 0)
    t.equal("%s: server exit status" % label, sstatus, 0)
    if not t.check("%s: summary" % label, s is not None):
        return
    step = s["steps"][0]
    for j in step["jobs"]:
        t.equal("%s %s: rounds" % (label, j["name"]), j["rounds"], ROUNDS)
        t.equal("%s %s: mismatches" % (label, j["name"]), j["mismatches"], 0)
        t.equal("%s %s: server rounds_completed" % (label, j["name"]),
                counters["jobs"].get(j["name"], {}).get("rounds_completed"), ROUNDS * j["chunks"])
    t.check("%s: results verified" % label, step["results_ok"] > 0)
    drops = dict(counters["drops"])
    drops.pop("not_for_us", None)
    if step["retransmits"] > 0:
        drops.pop("round_behind", None)
    t.equal("%s: server drops other than kernel chatter and late retransmissions" % label, drops, {})
    t.check("%s: both server lcores served pushes" % label,
            len(counters["lcores"]) == 2 and all(l.get("rx_packets", 0) > 0 for l in counters["lcores"]),
            str(counters["lcores"]))


def body(a, t):
    if not t.check("ip netns available", sh("ip netns add %s" % NS, check=False).returncode == 0):
        return
    try:
        sh("ip netns exec %s ip link set lo up" % NS)
        sh("ip netns exec %s ip link add pgs0 type veth peer name pgg0" % NS)
        for i in ("pgs0", "pgg0"):
            sh("ip netns exec %s ip link set %s up" % (NS, i))
        with tempfile.TemporaryDirectory(prefix="phub-kl-") as d:
            run(a, t, d, "af_packet", "net_af_packet_s,iface=pgs0,qpairs=2", "net_af_packet_g,iface=pgg0,qpairs=2")
            run(a, t, d, "tap", "net_tap0,iface=phubtap0", "net_af_packet_g,iface=phubtap0,qpairs=2")
    finally:
        sh("ip netns del %s" % NS, check=False)


if __name__ == "__main__":
    sys.exit(testing.main("phub-pktgen over af_packet and tap", body))

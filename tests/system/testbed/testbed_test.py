#!/usr/bin/python3
"""System test of the emulated datacenter (tools/testbed/testbed.py): 2 racks x 2 hosts, one hub host per
rack, 1 % loss on the core.

Checks (each can fail; a missing kernel feature or tool is a failed check, not a skip):
  - the hubs have their documented addresses (198.18.R.2) and are in the ground truth;
  - every host reaches its own hub and the other rack's hub, and the hubs reach each other;
  - loss: 2000 UDP datagrams from a rack-1 host to the rack-2 hub across the core lose a fraction within the
    binomial bounds of the configured 1 % (false-failure probability 1e-6 per side), and exactly the frames
    the nftables rule counted as dropped (a couple of stray ARP frames aside); once for loss entering the
    core, once for loss leaving it;
  - the core's interface counters grow by at least the frames' bytes;
  - loss 0 removes the nftables table, and then nothing is lost;
  - duplication 1 % on the core: duplicates received within bounds and equal to the rule's count;
  - a phub-server on DPDK (net_af_packet on the hub's eth0, the kernel's address released) in rack 2's hub
    serves a job whose rank 0 is in rack 1, across the 1 % lossy core: every result verified, the traffic
    counted on the core, the server stopped cleanly;
  - teardown leaves no namespace, no process and no root nftables table of the testbed, after a normal exit,
    after an exception inside `with`, after a failure during set-up, and after SIGTERM and SIGINT to the CLI.
Prints the measured figures. Every process is bounded by a timeout. Addresses: 198.18.0.0/15 only.
Usage: testbed_test.py --build BUILD_DIR (phub-server and phub-demo-worker are taken from there).
"""
import json
import math
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import testbed  # noqa: E402
import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

PY = "/usr/bin/python3"
N = 2000  # datagrams per run
PAYLOAD = 200  # bytes of UDP payload
FRAME = PAYLOAD + 8 + 20 + 14  # bytes on the wire per datagram, as the interface counters count them
PORT = 9400
ALPHA = 1e-6  # false-failure probability of each side of a statistical bound

RECEIVER = r"""
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((sys.argv[1], int(sys.argv[2])))
n = int(sys.argv[3])
print("ready", flush=True)
seen, dups, stray, nbytes = set(), 0, 0, 0
deadline, last = time.time() + 30, None
s.settimeout(0.2)
while time.time() < deadline and (last is None or time.time() - last < 1.0):
    try:
        data = s.recv(65536)
    except socket.timeout:
        continue
    last = time.time()
    nbytes += len(data)
    seq = int.from_bytes(data[:4], "big")
    if seq >= n:
        stray += 1
    elif seq in seen:
        dups += 1
    else:
        seen.add(seq)
print(json.dumps({"unique": len(seen), "dups": dups, "stray": stray, "bytes": nbytes}), flush=True)
"""

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
addr, n, size = (sys.argv[1], int(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
for seq in range(n):
    s.sendto(seq.to_bytes(4, "big") + bytes(size - 4), addr)
    if seq % 20 == 19:
        time.sleep(0.002)  # 20 datagrams per 2 ms: about 20 Mbit/s, below every link of the testbed
"""


def binomial_bounds(n, p, alpha):
    """(lo, hi): the smallest and largest counts outside of which Binomial(n, p) falls with probability <= alpha
    on each side."""
    pmf = [math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) +
                    (n - k) * math.log1p(-p)) for k in range(n + 1)]
    lo, acc = 0, 0.0
    while acc + pmf[lo] <= alpha:
        acc += pmf[lo]
        lo += 1
    hi, acc = n, 0.0
    while acc + pmf[hi] <= alpha:
        acc += pmf[hi]
        hi -= 1
    return lo, hi


def blast(tb, src_ns, dst):
    """N datagrams from src_ns to the hub dict dst; returns the receiver's report and the counters' changes."""
    rx = tb.popen(dst["ns"], ["timeout", "40", PY, "-c", RECEIVER, dst["addr"], str(PORT), str(N)],
                  stdout=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("receiver did not start")
        c0, r0 = tb.core_counters(), tb.core_rule_counters()
        testbed.sh(*tb.exec_argv(src_ns, ["timeout", "30", PY, "-c", SENDER, dst["addr"], str(PORT), str(N),
                                          str(PAYLOAD)]), timeout=40)
        out, _ = rx.communicate(timeout=45)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    report = json.loads(out.strip().splitlines()[-1])
    c1, r1 = tb.core_counters(), tb.core_rule_counters()
    report["counters"] = {dev: {k: c1[dev][k] - c0[dev][k] for k in c0[dev]} for dev in c0}
    report["rules"] = {dev: {k: r1[dev][k] - r0[dev][k] for k in r0[dev]} for dev in r0}
    return report


def check_loss_run(check, tb, src, dst, name, rule_dev, rule_kind, pct):
    rep = blast(tb, src["ns"], dst)
    lost = N - rep["unique"]
    counted = rep["rules"][rule_dev][rule_kind]
    lo, hi = binomial_bounds(N, pct / 100, ALPHA)
    print("%s: %d/%d lost (%.2f %%, bounds %d..%d for %g %%), nft counted %d, %d duplicates; core %s rx +%d B, "
          "%s tx +%d B" % (name, lost, N, 100.0 * lost / N, lo, hi, pct, counted, rep["dups"], "r%d" % src["rack"],
                           rep["counters"]["r%d" % src["rack"]]["rx_bytes"], "r%d" % dst["rack"],
                           rep["counters"]["r%d" % dst["rack"]]["tx_bytes"]), flush=True)
    check("%s: loss %.2f %% within the binomial bounds of %g %% (%d..%d of %d)" % (name, 100.0 * lost / N, pct, lo,
                                                                                   hi, N), lo <= lost <= hi)
    check("%s: nft counted the lost frames (%d counted, %d lost)" % (name, counted, lost),
          lost <= counted <= lost + 2)
    check("%s: no duplicates, nothing stray" % name, rep["dups"] == 0 and rep["stray"] == 0, str(rep))
    sent = rep["counters"]["r%d" % src["rack"]]["rx_bytes"]
    check("%s: core r%d counted at least the bytes sent into it (%d >= %d)" % (name, src["rack"], sent, N * FRAME),
          sent >= N * FRAME)
    if rule_kind == "in":
        out = rep["counters"]["r%d" % dst["rack"]]["tx_bytes"]
        check("%s: core r%d counted at least the bytes delivered (%d >= %d)" % (name, dst["rack"], out,
                                                                               rep["unique"] * FRAME),
              out >= rep["unique"] * FRAME)
    return rep


def cli_signal_teardown(check, sig):
    """The CLI's testbed, sent sig once it is up: it exits, and nothing of it remains."""
    prefix = "%ss%d%s" % (testbed.FAMILY, os.getpid(), sig.name[3:].lower())
    p = subprocess.Popen([PY, os.path.join(ROOT, "tools", "testbed", "testbed.py"), "demo", "--racks", "2",
                          "--hosts-per-rack", "1", "--core-loss-pct", "1", "--seconds", "60", "--prefix", prefix],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    inodes, up = set(), False
    try:
        deadline = time.time() + 60
        for line in p.stdout:
            if line.strip() == "up":
                up = True
                break
            if time.time() > deadline:
                break
        for name in os.listdir("/run/netns"):
            if name.startswith(prefix + "-"):
                inodes.add(os.stat("/run/netns/" + name).st_ino)
        p.send_signal(sig)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    left = [n for n in os.listdir("/run/netns") if n.startswith(prefix + "-")]
    procs = testbed.processes_in(inodes)
    check("CLI up (%d namespaces), then %s: exit %d, no namespace left %s, no process left %s"
          % (len(inodes), sig.name, rc, left, procs),
          up and len(inodes) == 9 and rc == 128 + sig and not left and not procs, p.stderr.read()[-500:])


def no_leaks(check, tb, what):
    leaks = tb.leaks()
    check("%s: nothing left (namespaces, processes, root nftables tables): %s" % (what, leaks),
          not any(leaks.values()) and bool(tb.netns_ids))


def hub_server(check, tb, build):
    """phub-server on DPDK (net_af_packet on the hub's eth0) in rack 2's hub, the kernel's address taken away;
    rank 0 in rack 1 (across the lossy core), rank 1 in rack 2. Every result must verify."""
    hub = tb.release_hub_address(2)
    net = phubnet.Net(2, build_dir=build, lcores=1, prefix=tb.prefix)  # its config and server start only
    try:
        job = phubnet.job(1, "T", 2, [20000, 3000, 1], 42100, allowed_sources=["198.18.1.0/24", "198.18.2.0/24"])
        net.config_path = livenet.write(os.path.join(net.tmp, "phub.lua"), net.config_text([job], server_ip=hub["addr"]))
        net.server = net.launch_server(hub["ns"], net.config_path, net.server_log, timeout_s=120)
        c0 = tb.core_counters()
        procs = [tb.popen(ns, ["timeout", "60", net.exe("tools/phub-demo/phub-demo-worker"), "--config",
                               net.config_path, "--job", "T", "--rank", str(rank), "--server", hub["addr"],
                               "--rounds", "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank, ns in enumerate([tb.ns_host(1, 1), tb.ns_host(2, 1)])]
        ok, detail = livenet.workers_ok(livenet.finish_workers(procs, 90))
        c1 = tb.core_counters()
        crossed = c1["r1"]["rx_bytes"] - c0["r1"]["rx_bytes"]
        net.signal_server(signal.SIGINT, hub["ns"])
        rc = net.server.wait(timeout=30)
        job_counters = phubnet.parse_counters(open(net.server_log).read()).get("job T", {})
        print("hub server: %s; core r1 rx +%d B; server exit %d, job T: %s" % (detail, crossed, rc, job_counters),
              flush=True)
        check("the hub's phub-server stops on SIGINT with exit 0 and its job's counters", rc == 0 and job_counters,
              open(net.server_log).read()[-2000:])
        check("phub-server on af_packet in hub %s serves rank 0 across the 1 %% lossy core and rank 1 in its rack: "
              "every result verified" % hub["addr"], ok, detail)
        check("rank 0's traffic crossed the core (r1 rx +%d B > 40 rounds x 23001 fp32)" % crossed,
              crossed > 40 * 23001 * 4)
    finally:
        net.down()


class FailingTestbed(testbed.Testbed):
    def _wait_reachable(self, timeout_s=15.0):
        raise RuntimeError("injected set-up failure")


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    lacks = testbed.kernel_lacks(nft=True)
    if not check("the kernel and tools have what the testbed needs (tbf, bridge, nft netdev hooks, numgen, dup)",
                 not lacks, "missing: %s" % ", ".join(lacks)):
        return check.summary()
    tb = testbed.Testbed(racks=2, hosts_per_rack=2, hubs_per_rack=1, core_loss_pct=1.0, host_offloads=False,
                         prefix="%st%d" % (testbed.FAMILY, os.getpid()))
    with tb:
        truth = tb.ground_truth()
        hub1, hub2 = tb.hub(1), tb.hub(2)
        print("hubs: %s; core: %s" % ([(h["name"], h["ns"], h["addr"]) for h in truth["hubs"]],
                                      json.dumps(truth["core"])), flush=True)
        check("hubs at their documented addresses (198.18.1.2, 198.18.2.2) and in the ground truth",
              [h["addr"] for h in truth["hubs"]] == ["198.18.1.2", "198.18.2.2"] ==
              [testbed.hub_addr(1), testbed.hub_addr(2)] and truth["core"]["loss_pct"] == 1.0)
        check("the core namespace holds the loss table, the root namespace none of the family",
              tb.nft_tables(tb.ns_core()) == ["netdev " + testbed.NFT_TABLE] and tb.leaks()["root_nft_tables"] == [],
              "core: %s, root: %s" % (tb.nft_tables(tb.ns_core()), tb.nft_tables()))
        for h in tb.hosts:
            own, other = tb.hub(h["rack"]), tb.hub(3 - h["rack"])
            check("%s reaches its hub %s and the remote hub %s" % (h["addr"], own["addr"], other["addr"]),
                  tb.reachable(h["ns"], own["addr"], 3) and tb.reachable(h["ns"], other["addr"], 3))
        check("the hubs reach each other across the core",
              tb.reachable(hub1["ns"], hub2["addr"], 3) and tb.reachable(hub2["ns"], hub1["addr"], 3))
        src = tb.hosts[0]
        check_loss_run(check, tb, src, hub2, "1 % loss entering the core", "r1", "in", 1.0)
        tb.set_core_loss(1.0, "out")
        check_loss_run(check, tb, src, hub2, "1 % loss leaving the core", "r2", "out", 1.0)
        tb.set_core_loss(0)
        check("loss 0 removes the core's nftables table", tb.nft_tables(tb.ns_core()) == [],
              str(tb.nft_tables(tb.ns_core())))
        rep = blast(tb, src["ns"], hub2)
        print("no loss: %d/%d received, %d duplicates, core r1 rx +%d B, r2 tx +%d B"
              % (rep["unique"], N, rep["dups"], rep["counters"]["r1"]["rx_bytes"], rep["counters"]["r2"]["tx_bytes"]),
              flush=True)
        check("no loss configured: all %d datagrams arrive once" % N,
              rep["unique"] == N and rep["dups"] == 0 and rep["stray"] == 0, str(rep))
        check("no loss configured: core r1 rx and r2 tx grew by at least %d B" % (N * FRAME),
              rep["counters"]["r1"]["rx_bytes"] >= N * FRAME and rep["counters"]["r2"]["tx_bytes"] >= N * FRAME,
              str(rep["counters"]))
        tb.set_core_dup(1.0)
        rep = blast(tb, src["ns"], hub2)
        lo, hi = binomial_bounds(N, 0.01, ALPHA)
        print("1 %% duplication: %d/%d received, %d duplicates (bounds %d..%d), nft counted %d"
              % (rep["unique"], N, rep["dups"], lo, hi, rep["rules"]["r2"]["dup"]), flush=True)
        check("1 %% duplication: all arrive, duplicates within bounds (%d in %d..%d)" % (rep["dups"], lo, hi),
              rep["unique"] == N and lo <= rep["dups"] <= hi)
        check("1 %% duplication: nft counted the duplicates (%d counted, %d received)"
              % (rep["rules"]["r2"]["dup"], rep["dups"]),
              rep["dups"] <= rep["rules"]["r2"]["dup"] <= rep["dups"] + 2)
        tb.set_core_dup(0)
        check("duplication 0 removes the core's nftables table", tb.nft_tables(tb.ns_core()) == [])
        tb.set_core_loss(1.0)
        hub_server(check, tb, build)
    no_leaks(check, tb, "after the test's testbed")

    small = dict(racks=1, hosts_per_rack=1, hubs_per_rack=1)
    tb = testbed.Testbed(prefix="%sx%d" % (testbed.FAMILY, os.getpid()), core_loss_pct=0.5, **small)
    try:
        with tb:
            raise KeyError("injected")
    except KeyError:
        pass
    no_leaks(check, tb, "after an exception inside `with`")
    tb = FailingTestbed(prefix="%sf%d" % (testbed.FAMILY, os.getpid()), core_loss_pct=0.5, **small)
    try:
        tb.up()
        check("a failing set-up raises", False)
    except RuntimeError as e:
        check("a failing set-up raises its error", "injected" in str(e), str(e))
    no_leaks(check, tb, "after a failure during set-up")
    for sig in (signal.SIGTERM, signal.SIGINT):
        cli_signal_teardown(check, sig)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The fault matrix (issue 17, first part): faults injected into a real phub-server (af_packet, one lcore) and
real phub-demo-worker ranks in network namespaces (tests/system/client/phubnet.py), every result element
verified by the workers. Phases, one server for the first four, restarted in the fifth:
  loss-0.1% / loss-1% / loss-5%  nftables `numgen random mod 1000 < N drop` on both directions of both
                                 worker namespaces of job "loss"; the rounds complete, nothing wrong
  dup-5%         nftables `dup to` on netdev ingress hooks of the bridge: 5 % of the UDP frames of both ranks
                 sent twice towards the server, 5 % of the server's frames twice towards the ranks; the server
                 counts duplicate contributions and ignores them
  reorder-5%     the delay line (tools/testbed/delayline.cpp) spliced into both ranks' bridge ports: 100
                 us each way, 5 % of the frames 1.5 ms later
  corrupt-2%     nftables payload mangling on the bridge: 4 bytes of gradient payload overwritten in 2 % of the
                 ranks' UDP frames (a raw write at @th: their UDP checksum left as it was); the server
                 (udp_checksum "verify") drops them as udp_checksum_bad, the ranks resend, nothing wrong
  corrupt-crc-2% the same bytes written at @ih, for which nft updates the UDP checksum (so the server would sum
                 them), to ranks that send the payload's CRC32C (--crc): the server drops them as bad_crc
  corrupt-back-2% the way back: the same write at @ih on 2 % of the server's UDP frames to both ranks of job
                 "back" (results of 352 elements). The server's CRC32C on every result (docs/protocol.md,
                 "Results") makes each rank drop them (bad_checksum) and ask again: nothing wrong
  worker-kill    rank 1 of job "victim" SIGKILLed mid-run and started again at once: it waits (its rank is
                 held by the dead process), the surviving rank 0 fails with the clear error round_stalled at
                 its deadline, the test starts rank 0 again, which restarts the job in a new epoch; the
                 waiting rank 1 joins it and the run completes. Job "steady" runs beside it untouched.
  straggler      rank 1 of job "lag" SIGSTOPped for 3 x round_stall_ms, then SIGCONT: the rounds complete
                 afterwards (rank 0 waits within its deadline); job "steady" untouched
  link-flap      the bridge side of rank 1's veth set down for 1 s, then up: the ranks retransmit and finish
  server-restart phub-server stopped (SIGINT) under traffic and started again with the same config: the
                 running ranks end with a clear error (no hang, no wrong result); a new run completes
Recovery: from the fault's end to the next completed round, from the job's rounds_completed counter
(`phub-ctl stats --json`, control.metrics_interval_ms 50, sampled every ~50 ms). Leaks: every job carries
traffic once before the faults (first-touch pages), then the idle baseline is taken: the mbufs in use of each
of the server's pools (`pools` in `stats --json`) and its RSS (/proc). After the last fault on that server
and a quiet second, every pool must be back to its baseline and the RSS within RSS_BOUND_KIB of it; each
phase also asserts no rx_nombuf/no_mbuf drop.
Usage: faults_test.py --build BUILD_DIR [--only loss,dup,...]   (root; removes namespaces, processes, nft tables, also on failure)
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
sys.path.insert(0, os.path.join(HERE, "..", "client"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "testbed"))
import livenet  # noqa: E402
import testbed  # noqa: E402
from livenet import Checks, phubnet  # noqa: E402
from faultmatrix import Matrix, Sampler, errors_of, pools_in_use, rounds_of, wrong_of  # noqa: E402
from restart_test import worker_pids  # noqa: E402

KEYS = [30000, 4097, 1]
STALL_MS = 500
METRICS_MS = 50
JOBS = [phubnet.job(1, "loss", 2, KEYS, 44100), phubnet.job(2, "victim", 2, KEYS, 44200),
        phubnet.job(3, "steady", 2, KEYS, 44300), phubnet.job(4, "lag", 2, KEYS, 44400),
        phubnet.job(5, "flap", 2, KEYS, 44500), phubnet.job(6, "again", 2, KEYS, 44600),
        phubnet.job(7, "dup", 2, KEYS, 44700), phubnet.job(8, "reorder", 2, KEYS, 44800),
        phubnet.job(9, "corrupt", 2, KEYS, 44900), phubnet.job(20, "crc", 2, KEYS, 46000),
        phubnet.job(21, "back", 2, KEYS, 46100)]
SETTINGS = dict(control=dict(metrics_interval_ms=METRICS_MS))
NFT_TABLE = "phubfault"
DELAY = ["--delay-us", "100", "--reorder", "0.05", "--reorder-extra-us", "1500"]
# Byte 100 of the UDP payload (gradient elements; the phub header is 54 bytes), from the transport header: nft
# leaves the UDP checksum alone for a raw write at @th. (At @ih, the inner header, nft 1.0.6 asks the kernel
# to update the UDP checksum for the new bytes: a corruption the checksum cannot see.)
CORRUPT_OFFSET_BITS = (8 + 100) * 8
# The server's RSS may grow this much from the idle baseline (every job touched once) to the end of the
# faults: the control thread's allocations (JSON samples, phub-ctl connections) may move the heap's top by a
# few pages. A leak of one 2 KiB mbuf-sized allocation per round would exceed it within ~500 rounds.
RSS_BOUND_KIB = 1024


def start(net, name, namespaces, args, timeout_s=40, ranks=None):
    """phub-demo-worker rank r in worker namespace namespaces[i], not waited for."""
    procs = []
    for i, ns in enumerate(namespaces):
        rank = i if ranks is None else ranks[i]
        argv = ["timeout", str(timeout_s), net.exe("tools/phub-demo/phub-demo-worker"), "--config", net.config_path,
                "--job", name, "--rank", str(rank), "--server", phubnet.SERVER_IP] + list(args)
        procs.append(net.popen(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return procs


def finish(procs, timeout_s=60):
    return livenet.finish_workers(procs, timeout_s)


def server_pid(net):
    for pid in (phubnet.sh("ip", "netns", "pids", net.ns_server(), check=False, capture=True) or "").split():
        try:
            if open("/proc/%s/comm" % pid).read().strip() == "phub-server":
                return int(pid)
        except OSError:
            pass
    return None


def server_memory(net):
    """(RSS in KiB, rx_nombuf + no_mbuf drops) of the running server."""
    s = livenet.Ctl(net).stats()
    rss = server_rss_kib(net)
    nombuf = sum(p["rx_nombuf"] for p in s["ports"]) + s["drops"].get("no_mbuf", 0)
    return rss, nombuf


def server_rss_kib(net):
    pid = server_pid(net)
    for line in open("/proc/%d/status" % pid) if pid else ():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def idle_state(net, quiet_s):
    """After quiet_s without traffic: (RSS KiB, {pool: in_use}) of the running server."""
    time.sleep(quiet_s)
    return server_rss_kib(net), pools_in_use(livenet.Ctl(net).stats())


def check_no_leak(check, what, baseline, now, rss_bound_kib=RSS_BOUND_KIB):
    """Every pool back to its idle baseline, RSS within the bound; True if so."""
    (rss0, pools0), (rss1, pools1) = baseline, now
    check("%s: every mbuf back in its pool (in use, baseline -> now: %s)" % (what, ", ".join(
        "%s %d -> %d" % (n, pools0.get(n, 0), pools1.get(n, 0)) for n in sorted(pools1))),
          bool(pools1) and all(pools1[n] == pools0.get(n, 0) for n in pools1))
    check("%s: server RSS %d -> %d KiB (%+d KiB, bound %d KiB)" % (what, rss0, rss1, rss1 - rss0, rss_bound_kib),
          0 < rss1 and rss1 - rss0 <= rss_bound_kib)
    return bool(pools1) and all(pools1[n] == pools0.get(n, 0) for n in pools1) and rss1 - rss0 <= rss_bound_kib


def stats_after(net, t, timeout_s=10):
    """The first `stats --json` sample the server took after time t (its samples come every METRICS_MS)."""
    deadline = time.time() + timeout_s
    while True:
        s = livenet.Ctl(net).stats()
        if s["taken_unix_ms"] / 1000 > t or time.time() > deadline:
            return s
        time.sleep(METRICS_MS / 1000 / 2)


def link_counts(net):
    """(frames dropped by the veths of the server's link, frames the server's eth0 received) from the kernel.
    A frame eth0 received that the server's port never counted was lost in af_packet's ring (DPDK 22.11's
    af_packet PMD never reads PACKET_STATISTICS, so rx_missed does not show it)."""
    def stat(ns, dev, name):
        out = phubnet.sh("ip", "netns", "exec", ns, "cat", "/sys/class/net/%s/statistics/%s" % (dev, name),
                         capture=True, check=False)
        return int(out.strip() or 0)
    return (stat(net.prefix + "-br", "sv", "tx_dropped") + stat(net.ns_server(), "eth0", "rx_dropped"),
            stat(net.ns_server(), "eth0", "rx_packets"))


def frames_lost_on_the_way(s0, link0, s1, link1):
    """Frames lost between the bridge and the server's lcore between two (stats, link_counts) readings taken
    while no frame was in flight: veth drops, af_packet ring overflows, the port's rx_missed."""
    port_rx = sum(p["rx_packets"] for p in s1["ports"]) - sum(p["rx_packets"] for p in s0["ports"])
    missed = sum(p["rx_missed"] for p in s1["ports"]) - sum(p["rx_missed"] for p in s0["ports"])
    return (link1[0] - link0[0]) + max(0, (link1[1] - link0[1]) - port_rx) + missed


def job_drops(net, name):
    s = livenet.Ctl(net).stats()
    j = livenet.job_of(s, name)
    return {r: n for r, n in j["drops"].items() if n}


def nft_loss(br, ports, permille):
    """Loss on the bridge (family bridge, forward hook), both directions of the worker ports: a drop there looks
    like a lossy link to both ends. (In a worker's own output hook a drop makes sendmmsg fail with EPERM,
    which the client rightly takes for a local error, not a loss.)"""
    names = ", ".join('"%s"' % p for p in ports)
    phubnet.nft_apply(br, "table bridge %s {\n chain lossy { type filter hook forward priority 0; "
                          "iifname { %s } numgen random mod 1000 < %d counter drop; "
                          "oifname { %s } numgen random mod 1000 < %d counter drop; }\n}\n"
                          % (NFT_TABLE, names, permille, names, permille))


def nft_chain_packets(ns, family="bridge"):
    """{chain: packets counted by its rules} of our table in namespace ns."""
    out = phubnet.sh("ip", "netns", "exec", ns, "nft", "-j", "list", "table", family, NFT_TABLE, capture=True,
                     check=False)
    counts = {}
    for item in json.loads(out or '{"nftables": []}')["nftables"]:
        rule = item.get("rule")
        if rule:
            counts[rule["chain"]] = counts.get(rule["chain"], 0) + sum(
                e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
    return counts


def nft_dropped(br):
    return sum(nft_chain_packets(br).values())


def nft_clear(br, family="bridge"):
    phubnet.sh("ip", "netns", "exec", br, "nft", "delete", "table", family, NFT_TABLE, check=False)


def leak_check(check, net, phase, before):
    after = server_memory(net)
    # RSS may grow while the mempool's pages are touched for the first time; a leak would keep growing
    # phase after phase and show up as rx_nombuf / no_mbuf drops.
    check("%s: no mbuf exhaustion (rx_nombuf+no_mbuf %d -> %d), server RSS %d -> %d KiB" % (
        phase, before[1], after[1], before[0], after[0]), after[1] == before[1])
    return after


def phase_loss(check, mx, net, sampler):
    for pm, label in ((1, "0.1%"), (10, "1%"), (50, "5%")):
        before = server_memory(net)
        br = net.prefix + "-br"
        try:
            nft_loss(br, ["w0", "w1"], pm)
            res = finish(start(net, "loss", [0, 1], ["--seconds", "2.5", "--timeout-ms", "20000"]))
            dropped = nft_dropped(br)
        finally:
            nft_clear(br)
        ok, detail = livenet.workers_ok(res)
        check("loss-%s: both ranks complete, every element verified, %d packets dropped by nft" % (label, dropped),
              ok and dropped > 0, detail)
        retx = sum(int(s.get("retransmits", 0)) + int(s.get("fast_retransmits", 0)) for _, s, _ in res)
        mx.line("loss-" + label, rounds_of(res), wrong_of(res), len(errors_of(res)), None,
                "%d packets dropped, %d resends" % (dropped, retx))
        leak_check(check, net, "loss-" + label, before)


def run_fault(net, job, seconds=2.5):
    """Both ranks of `job` in worker namespaces 0 and 1 for `seconds`, waited for."""
    return finish(start(net, job, [0, 1], ["--seconds", str(seconds), "--timeout-ms", "20000"]))


def sum_field(results, *fields):
    return sum(int(s.get(f, 0)) for _, s, _ in results for f in fields)


def phase_dup(check, mx, net, sampler):
    before = server_memory(net)
    br = net.prefix + "-br"
    dup0 = livenet.job_of(livenet.Ctl(net).stats(), "dup")["duplicates"]
    # netdev ingress of each worker's bridge port: a copy straight out of the server's port (sv); of the
    # server's port: a copy to the worker the frame is for.
    rules = "table netdev %s {\n" % NFT_TABLE
    for i in (0, 1):
        rules += (' chain up%d { type filter hook ingress device "w%d" priority 0; '
                  'meta l4proto udp numgen random mod 1000 < 50 counter dup to "sv"; }\n' % (i, i))
    rules += ' chain down { type filter hook ingress device "sv" priority 0; %s }\n}\n' % " ".join(
        'ip daddr %s meta l4proto udp numgen random mod 1000 < 50 counter dup to "w%d";' % (phubnet.worker_ip(i), i)
        for i in (0, 1))
    try:
        phubnet.nft_apply(br, rules)
        res = run_fault(net, "dup")
        chains = nft_chain_packets(br, "netdev")
    finally:
        nft_clear(br, "netdev")
    up, down = chains.get("up0", 0) + chains.get("up1", 0), chains.get("down", 0)
    dups = livenet.job_of(stats_after(net, time.time() + 0.1), "dup")["duplicates"] - dup0
    seen = sum_field(res, "duplicates")
    ok, detail = livenet.workers_ok(res)
    check("dup-5%%: %d frames duplicated to the server, %d to the ranks; the server ignored %d duplicate "
          "contributions, the ranks %d duplicate results; every element verified" % (up, down, dups, seen),
          ok and up > 0 and down > 0 and dups > 0, detail)
    mx.line("dup-5%", rounds_of(res), wrong_of(res), len(errors_of(res)), None,
            "%d+%d frames duplicated; server ignored %d duplicate pushes" % (up, down, dups))
    leak_check(check, net, "dup-5%", before)


class SplicedDelayLines:
    """The delay line spliced into bridge ports: `wI` leaves the bridge, and a delay line forwards between it
    and a new veth pair (dlxI, dlyI) whose dlyI joins the bridge instead. Undone by close(), which stops the
    lines and returns their counters."""

    def __init__(self, net, exe, ports, args):
        self.br, self.ports, self.procs, self.logs = net.prefix + "-br", [], [], []
        try:
            for i in ports:
                phubnet.sh("ip", "-n", self.br, "link", "set", "w%d" % i, "nomaster")
                self.ports.append(i)
                phubnet.sh("ip", "-n", self.br, "link", "add", "dlx%d" % i, "mtu", str(net.mtu), "type", "veth",
                           "peer", "name", "dly%d" % i, "mtu", str(net.mtu))
                phubnet.sh("ip", "-n", self.br, "link", "set", "dly%d" % i, "master", "br0", "up")
                phubnet.sh("ip", "-n", self.br, "link", "set", "dlx%d" % i, "up")
                log = os.path.join(net.tmp, "delayline-w%d.log" % i)
                p = subprocess.Popen(["ip", "netns", "exec", self.br, "timeout", "120", exe, "--a", "w%d" % i, "--b",
                                      "dlx%d" % i, "--seed", str(7 + i)] + args, stderr=open(log, "w"))
                net.procs.append(p)
                self.procs.append(p)
                self.logs.append(log)
            time.sleep(0.3)
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("a delay line did not start: " + " ".join(open(f).read() for f in self.logs))
        except BaseException:
            self.close()
            raise

    LINE = re.compile(r"forwarded (\d+)/(\d+), dropped (\d+), reordered (\d+)/(\d+)")

    def close(self):
        """{'forwarded', 'dropped', 'reordered'} summed over the lines (both directions)."""
        for p in self.procs:
            p.terminate()  # `timeout` passes SIGTERM on; the line prints its counters and exits
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for i in self.ports:
            phubnet.sh("ip", "-n", self.br, "link", "del", "dlx%d" % i, check=False)
            phubnet.sh("ip", "-n", self.br, "link", "set", "w%d" % i, "master", "br0", "up", check=False)
        total = dict(forwarded=0, dropped=0, reordered=0)
        for log in self.logs:
            for m in self.LINE.finditer(open(log).read()):
                v = list(map(int, m.groups()))
                total["forwarded"] += v[0] + v[1]
                total["dropped"] += v[2]
                total["reordered"] += v[3] + v[4]
        self.procs, self.ports = [], []
        return total


def phase_reorder(check, mx, net, sampler):
    before = server_memory(net)
    lines = SplicedDelayLines(net, testbed.build_delayline(net.build), [0, 1], DELAY)
    try:
        res = run_fault(net, "reorder")
    finally:
        dl = lines.close()
    ok, detail = livenet.workers_ok(res)
    check("reorder-5%%: both ranks' links through the delay line (%d frames forwarded, %d reordered, %d dropped): "
          "every element verified" % (dl["forwarded"], dl["reordered"], dl["dropped"]),
          ok and dl["reordered"] > 0, detail)
    mx.line("reorder-5%", rounds_of(res), wrong_of(res), len(errors_of(res)), None,
            "%d of %d frames reordered; %d fast retransmits" % (dl["reordered"], dl["forwarded"],
                                                                 sum_field(res, "fast_retransmits")))
    leak_check(check, net, "reorder-5%", before)


def corrupt(check, mx, net, fault, job, payload, counter, extra_args=()):
    """Overwrites 4 bytes of gradient payload (UDP payload byte 100) in 2 % of the frames from both ranks of
    `job` to the server, with the nft raw write `payload` (@th,864 or @ih,800: the same bytes), while they
    run; the server's `counter(stats)` must count exactly the frames corrupted, less those lost on the way."""
    before = server_memory(net)
    br = net.prefix + "-br"
    link0 = link_counts(net)
    s0 = stats_after(net, time.time())
    # The write fails, and the counter after it does not count, on frames too short for the offset (joins,
    # rerequests, the 1-element key). Only frames forwarded to the server's port: a frame the bridge floods
    # (a destination it has not learnt yet, e.g. after the delay lines' ports went) passes this hook once
    # per port.
    rules = ("table bridge %s {\n chain corrupt { type filter hook forward priority 0; iifname { \"w0\", \"w1\" } "
             "oifname \"sv\" meta l4proto udp numgen random mod 1000 < 20 %s,32 set 0x5a5a5a5a counter; }\n}\n"
             % (NFT_TABLE, payload))
    try:
        phubnet.nft_apply(br, rules)
        res = finish(start(net, job, [0, 1], ["--seconds", "2.5", "--timeout-ms", "20000"] + list(extra_args)))
        mangled = nft_dropped(br)
    finally:
        nft_clear(br)
    link1 = link_counts(net)
    s1 = stats_after(net, time.time() + 0.1)
    name, bad = counter(s1)
    bad -= counter(s0)[1]
    lost = frames_lost_on_the_way(s0, link0, s1, link1)
    ok, detail = livenet.workers_ok(res)
    # Each corrupted frame reaches the server unless the kernel or the port lost it on the way (counted);
    # nothing else is bad.
    check("%s: %d frames corrupted, %d dropped by the server as %s (%d frames lost on the server's link); "
          "every element verified" % (fault, mangled, bad, name, lost),
          ok and mangled > 0 and mangled - lost <= bad <= mangled, detail)
    mx.line(fault, rounds_of(res), wrong_of(res), len(errors_of(res)), None,
            "%d frames corrupted, %d counted %s; %d resends" % (
                mangled, bad, name, sum_field(res, "retransmits", "fast_retransmits")))
    leak_check(check, net, fault, before)


def phase_corrupt(check, mx, net, sampler):
    """A raw write at @th leaves the UDP checksum as it was: the server's software check drops the frame."""
    corrupt(check, mx, net, "corrupt-2%", "corrupt", "@th,%d" % CORRUPT_OFFSET_BITS,
            lambda s: ("udp_checksum_bad", s["drops"]["udp_checksum_bad"]))


def phase_corrupt_crc(check, mx, net, sampler):
    """A raw write at @ih makes nft fix the UDP checksum for the new bytes, so only the payload CRC32C the ranks
    send (--crc, the header's crc flag) can tell: the server drops the frame as malformed bad_crc."""
    corrupt(check, mx, net, "corrupt-crc-2%", "crc", "@ih,%d" % (CORRUPT_OFFSET_BITS - 64),
            lambda s: ("bad_crc", s["malformed"]["bad_crc"]), ["--crc"])


def phase_corrupt_back(check, mx, net, sampler):
    """The way back: 4 bytes of result payload overwritten at @ih (nft fixes any UDP checksum, so only the
    result's CRC32C can tell) in 2 % of the server's frames to the ranks of job "back". Each rank must drop
    every one it receives (bad_checksum), ask again, and verify every element; the server sees nothing."""
    before = server_memory(net)
    br = net.prefix + "-br"
    rules = ("table bridge %s {\n chain corrupt { type filter hook forward priority 0; iifname \"sv\" "
             "oifname { \"w0\", \"w1\" } meta l4proto udp numgen random mod 1000 < 20 @ih,%d,32 set 0x5a5a5a5a "
             "counter; }\n}\n" % (NFT_TABLE, CORRUPT_OFFSET_BITS - 64))
    try:
        phubnet.nft_apply(br, rules)
        res = finish(start(net, "back", [0, 1], ["--seconds", "2.5", "--timeout-ms", "20000"]))
        mangled = nft_dropped(br)
    finally:
        nft_clear(br)
    bad = sum_field(res, "bad_checksum")
    ok, detail = livenet.workers_ok(res)
    # A frame the rank's kernel dropped (a full socket buffer) never reaches its checksum check.
    check("corrupt-back-2%%: %d result frames corrupted on the way back, %d dropped by the ranks as bad_checksum; "
          "every element verified" % (mangled, bad), ok and mangled > 0 and 0 < bad <= mangled, detail)
    mx.line("corrupt-back-2%", rounds_of(res), wrong_of(res), len(errors_of(res)), None,
            "%d frames corrupted, %d counted bad_checksum by the ranks; %d resends" % (
                mangled, bad, sum_field(res, "retransmits", "fast_retransmits")))
    leak_check(check, net, "corrupt-back-2%", before)


def warm_up(check, net):
    """Every job (but `again`, which the server-restart phase uses first) carries 30 rounds once, all at the
    same time, so that the idle baseline has every job's pages touched."""
    names = [j["name"] for j in JOBS if j["name"] != "again"]
    procs = [p for n in names for p in start(net, n, [0, 1], ["--rounds", "30", "--timeout-ms", "20000"])]
    res = finish(procs)
    ok, detail = livenet.workers_ok(res)
    check("warm-up: every job verifies 30 rounds", ok, detail)


def beside_steady(check, net, steady_s, name, args, phase):
    """Job `steady` (namespaces 2, 3) and job `name` (namespaces 0, 1) started; after 1 s of rounds, the pids of
    `name`'s phub-demo-worker processes. (steady, procs, pids), or None (reported) if they were not found."""
    steady = start(net, "steady", [2, 3], ["--seconds", str(steady_s), "--timeout-ms", "20000"])
    procs = start(net, name, [0, 1], args)
    time.sleep(1.0)
    pids = worker_pids(procs)
    if len(pids) != 2:
        check("%s: %s ranks found" % (phase, name), False, str(pids))
        finish(steady + procs)
        return None
    return steady, procs, pids


def steady_untouched(check, net, steady, phase):
    """Waits for job steady's ranks: they must complete with every element verified and no drop counted."""
    st = finish(steady)
    ok, detail = livenet.workers_ok(st)
    drops = job_drops(net, "steady")
    check("%s: job steady beside it completes, no drops against it" % phase, ok and not drops,
          detail + " drops %s" % drops)
    return st


def phase_kill(check, mx, net, sampler):
    before = server_memory(net)
    started = beside_steady(check, net, 9, "victim", ["--rounds", "1000000", "--timeout-ms", "2000"], "worker-kill")
    if started is None:
        return
    steady, old, pids = started
    os.kill(pids[1], signal.SIGKILL)
    old[1].wait(timeout=10)
    # The killed rank is started again at once; it waits, its rank held by the dead process's incarnation.
    t_restart = time.time()
    new1 = start(net, "victim", [1], ["--rounds", "200", "--timeout-ms", "15000"], ranks=[1])
    (rc0, s0, err0), = finish([old[0]], 30)  # the survivor: round_stalled at its 2 s deadline
    old_rounds = int(s0.get("rounds", 0))
    check("worker-kill: the surviving rank 0 ends with the clear error round_stalled naming rank 1 (%s)" % err0[-120:],
          rc0 != 0 and s0.get("status") == "round_stalled" and int(s0.get("mismatches", 1)) == 0,
          "exit %d status %s" % (rc0, s0.get("status")))
    new0 = start(net, "victim", [0], ["--rounds", "200", "--timeout-ms", "15000"], ranks=[0])  # a new epoch
    res = finish(new0 + new1)
    ok, detail = livenet.workers_ok(res)
    check("worker-kill: the restarted run (new epoch, the killed rank rejoined) verifies 200 rounds", ok, detail)
    st = steady_untouched(check, net, steady, "worker-kill")
    rec = sampler.recovery("victim", t_restart, new_epoch=True)
    mx.line("worker-kill", old_rounds + rounds_of(res), wrong_of(res) + wrong_of(st) + int(s0.get("mismatches", 0)),
            len(errors_of(res)) + len(errors_of(st)) + (1 if rc0 else 0), rec,
            "errors: the survivor's round_stalled; recovery from the restart of the killed rank, bounded by "
            "the survivor's 2 s deadline; steady %d rounds" % rounds_of(st))
    leak_check(check, net, "worker-kill", before)


def phase_straggler(check, mx, net, sampler):
    before = server_memory(net)
    started = beside_steady(check, net, 5, "lag", ["--seconds", "4", "--timeout-ms", "15000"], "straggler")
    if started is None:
        return
    steady, lag, pids = started
    os.kill(pids[1], signal.SIGSTOP)
    time.sleep(3 * STALL_MS / 1000)
    t_cont = time.time()
    os.kill(pids[1], signal.SIGCONT)
    res = finish(lag)
    ok, detail = livenet.workers_ok(res)
    stalls = livenet.job_of(livenet.Ctl(net).stats(), "lag")["stalls_reported"]
    check("straggler: rank 1 stopped %.1f s (> round_stall_ms %d ms, %d stalls reported), the rounds complete "
          "afterwards" % (3 * STALL_MS / 1000, STALL_MS, stalls), ok and stalls > 0, detail)
    st = steady_untouched(check, net, steady, "straggler")
    mx.line("straggler", rounds_of(res), wrong_of(res) + wrong_of(st), len(errors_of(res)) + len(errors_of(st)),
            sampler.recovery("lag", t_cont), "SIGSTOP %.1f s; steady %d rounds" % (3 * STALL_MS / 1000, rounds_of(st)))
    leak_check(check, net, "straggler", before)


def phase_flap(check, mx, net, sampler):
    before = server_memory(net)
    br = net.prefix + "-br"
    procs = start(net, "flap", [0, 1], ["--seconds", "4", "--timeout-ms", "15000"])
    time.sleep(1.0)
    try:
        phubnet.sh("ip", "-n", br, "link", "set", "w1", "down")
        time.sleep(1.0)
    finally:
        phubnet.sh("ip", "-n", br, "link", "set", "w1", "up")
    t_up = time.time()
    res = finish(procs)
    ok, detail = livenet.workers_ok(res)
    retx = sum(int(s.get("retransmits", 0)) + int(s.get("rerequests", 0)) for _, s, _ in res)
    check("link-flap: rank 1's link down 1 s: both ranks finish, every element verified (%d resends)" % retx, ok,
          detail)
    mx.line("link-flap", rounds_of(res), wrong_of(res), len(errors_of(res)), sampler.recovery("flap", t_up),
            "%d retransmits+rerequests" % retx)
    leak_check(check, net, "link-flap", before)


CLEAR = ("epoch", "unreachable", "timeout", "round_stalled", "round_mismatch")


def phase_server_restart(check, mx, net, sampler):
    procs = start(net, "again", [0, 1], ["--rounds", "1000000", "--timeout-ms", "3000"])
    time.sleep(1.5)
    t0 = time.time()
    net.stop_server()
    net.start_server(JOBS, round_stall_ms=STALL_MS, settings=SETTINGS, timeout_s=200)
    t_ready = time.time()
    res = finish(procs, 40)
    took = time.time() - t0
    statuses = [s.get("status") for _, s, _ in res]
    check("server-restart: the running ranks end with a clear error %s within %.1f s (down %.1f s), none wrong" % (
        statuses, took, t_ready - t0), all(rc != 0 and s.get("status") in CLEAR for rc, s, _ in res) and
          wrong_of(res) == 0, "; ".join(e[-200:] for _, _, e in res))
    for r, (_, s, err) in enumerate(res):
        print("    rank %d after the restart: %s" % (r, err[-220:]), flush=True)
    new = finish(start(net, "again", [0, 1], ["--rounds", "200", "--timeout-ms", "15000"]))
    ok, detail = livenet.workers_ok(new)
    check("server-restart: a new run on the restarted server verifies 200 rounds", ok, detail)
    mx.line("server-restart", rounds_of(res) + rounds_of(new), wrong_of(res) + wrong_of(new),
            len(errors_of(res)) + len(errors_of(new)), sampler.recovery("again", t_ready, new_server=True),
            "errors: the old run's %s; recovery from the server's ready to the first round of a new run started "
            "after the old one failed" %
            "/".join(statuses))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--only", help="comma-separated phases, e.g. dup,corrupt (default: all)")
    a = ap.parse_args()
    livenet.unwind_on_sigterm()
    check = Checks()
    if os.geteuid() != 0:
        print("faults test: needs root (namespaces, af_packet, nftables)")
        return 1
    t0 = time.time()
    mx = Matrix(check)
    with phubnet.Net(4, build_dir=a.build, memory_mb=256, lcores=1) as net:
        net.start_server(JOBS, round_stall_ms=STALL_MS, settings=SETTINGS, timeout_s=200)
        warm_up(check, net)
        baseline = idle_state(net, 1.0)
        sampler = Sampler(net, METRICS_MS)
        try:
            phases = [phase_loss, phase_dup, phase_reorder, phase_corrupt, phase_corrupt_crc,
                      phase_corrupt_back, phase_kill,
                      phase_straggler, phase_flap, "leaks", phase_server_restart]
            if a.only:
                phases = [p for p in phases if p == "leaks" or p.__name__[6:] in a.only.split(",")]
            for phase in phases:
                if phase == "leaks":  # the last phase on this server process: its mbufs and memory now
                    check_no_leak(check, "after the faults and 1 s quiet (mbufs in use at most %d in any sample)"
                                  % sampler.mbufs_in_use_high, baseline, idle_state(net, 1.0))
                    continue
                t = time.time()
                try:
                    phase(check, mx, net, sampler)
                except Exception as e:  # a phase that breaks is a failure; the others still run
                    check("%s ran" % phase.__name__, False, repr(e))
                print("  (%s: %.1f s)" % (phase.__name__, time.time() - t), flush=True)
        finally:
            sampler.stop()
            if check.failed:
                print(open(net.server_log).read()[-2000:])
            net.stop_server()
    print("\n".join(mx.lines))
    print("  (total %.1f s)" % (time.time() - t0), flush=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

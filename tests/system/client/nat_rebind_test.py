#!/usr/bin/python3
"""A worker behind a NAT that rebinds its address mid-run, against the real phub-server (issue 16: "a rank's
reply address changes only through an authenticated join"; the client must then join again by itself).

Two ranks of one job (with a secret) run phub-demo-worker for a fixed time, every element verified, once with
sessions (the default for a job with a secret) and once without (`sessions = false, insecure = true`). Rank 1's
namespace translates its UDP port on the way to the server and back, statelessly in nftables (raw priority,
notrack): its socket is bound to PORT, the server sees PORT_SEEN[0]. Twice during the run the translation
moves to the next port of PORT_SEEN at once, as a NAT that lost its mapping does: from then on the server
sees rank 1's packets from a new port while it keeps answering the proven old one (`addresses_kept`), and
those answers no longer reach rank 1 (a rule counts them). The client must notice the silence (two timeouts
without any answer), join again from where it is, and finish every round right. Without sessions the new
binding proves itself by the address cookie (`addresses_proven`); with sessions the join's new session, bound
to the address the join came from, moves the rank there when its first packet opens (`sessions_established`).
Usage: nat_rebind_test.py --build BUILD_DIR   (root; removes namespaces and processes, also on failure)
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

PORT = 47001                       # rank 1's socket
PORT_SEEN = [47101, 47102, 47103]  # its address as the server sees it, one per NAT binding
REBIND_AT_S = [2.5, 5.0]           # after the workers start
RUN_S = 8
LCORES = 2                         # the server's; the job's chunks spread over both
TIMEOUT_MS = 4000                  # an operation's deadline: recovery must come well within it
JOBS = {"sessions": phubnet.job(1, "natted", 2, [30000, 4097, 1], 46300, secret="nat-rebind-test-secret-0123"),
        "no sessions": phubnet.job(1, "natted", 2, [30000, 4097, 1], 46300, secret="nat-rebind-test-secret-0123",
                                   sessions=False, insecure=True)}


def nat_rules(seen, old=None):
    """The stateless translation of rank 1's port to `seen` and back; the server's answers to the `old`
    binding are counted (and dropped: nothing listens there anyway). The server sends UDP checksum 0 (none,
    legal in IPv4), which nftables' incremental update of a rewritten port would turn into a wrong one: the
    way back sets it to 0 again."""
    counted = ("    ip saddr %s udp dport %d counter drop\n" % (phubnet.SERVER_IP, old)) if old else ""
    return ("flush ruleset\n"
            "table ip phubnat {\n"
            "  chain out {\n"
            "    type filter hook output priority raw; policy accept;\n"
            "    ip daddr %s udp sport %d notrack udp sport set %d\n"
            "  }\n"
            "  chain in {\n"
            "    type filter hook prerouting priority raw; policy accept;\n"
            "    ip saddr %s udp dport %d notrack udp dport set %d udp checksum set 0\n"
            "%s"
            "  }\n"
            "}\n") % (phubnet.SERVER_IP, PORT, seen, phubnet.SERVER_IP, seen, PORT, counted)


def old_binding_packets(ns):
    """Packets the counter of the last old binding saw (nft's list output)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "chain", "ip", "phubnat", "in"], capture_output=True,
                         text=True, timeout=10).stdout
    for line in out.splitlines():
        if "counter packets" in line:
            return int(line.split("counter packets")[1].split()[0])
    return 0


def run(build, check, mode):
    """One run of the rebinding scenario on JOBS[mode]; its checks are prefixed with the mode."""
    def expect(what, ok):
        check("%s: %s" % (mode, what), ok)

    with phubnet.Net(workers=2, lcores=LCORES, build_dir=build) as net:
        net.start_server([JOBS[mode]], timeout_s=120)
        ns = net.ns_worker(1)
        phubnet.nft_apply(ns, nat_rules(PORT_SEEN[0]))
        # --no-gso: a UDP GSO batch leaves the output hook before the kernel segments and checksums it, and a
        # port rewritten there breaks the segments' checksums (the server drops them: udp_checksum_bad).
        args = ["--seconds", str(RUN_S), "--timeout-ms", str(TIMEOUT_MS), "--no-gso"]
        # Rank r in worker namespace r, each socket on PORT (only rank 1's namespace translates it).
        procs = livenet.start_workers(net, "natted", [0, 1], args + ["--bind-port", str(PORT)], net.config_path, 60)
        started = time.time()
        answers_lost = []
        for i, at in enumerate(REBIND_AT_S):
            time.sleep(max(0.0, started + at - time.time()))
            if i > 0:
                answers_lost.append(old_binding_packets(ns))
            phubnet.nft_apply(ns, nat_rules(PORT_SEEN[i + 1], old=PORT_SEEN[i]))
        time.sleep(max(0.0, started + RUN_S - 1 - time.time()))
        answers_lost.append(old_binding_packets(ns))
        results = livenet.finish_workers(procs, 60)
        counters, text = net.stop_server()

    ok, detail = livenet.workers_ok(results)
    job = counters.get("job natted", {})
    rejoins = [int(s.get("rejoins", 0)) for _, s, _ in results]
    print("%s: rank summaries: %s" % (mode, detail))
    drops = counters.get("drops", {})
    print("%s: server drops: %s" % (mode, drops))
    print("%s: server: addresses_kept %d, joins %d, addresses_proven %d, sessions_established %d; answers to an old "
          "binding after each rebind: %s; rejoins by rank: %s"
          % (mode, job.get("addresses_kept", 0), job.get("joins", 0), job.get("addresses_proven", 0),
             job.get("sessions_established", 0), answers_lost, rejoins))
    expect("the server ran to its stop", "phub: ready" in text)
    expect("the translation kept every checksum right (udp_checksum_bad %d)" % drops.get("udp_checksum_bad", 0),
           drops.get("udp_checksum_bad", 0) == 0)
    expect("both ranks finish every round of %d s with every element right (status OK, no mismatch): %s"
           % (RUN_S, detail), ok)
    expect("each rebinding really cut rank 1 off: the server answered its old binding (%s)" % answers_lost,
           len(answers_lost) == len(REBIND_AT_S) and all(n > 0 for n in answers_lost))
    expect("the server kept rank 1's address against its packets from the new one (addresses_kept %d)"
           % job.get("addresses_kept", 0), job.get("addresses_kept", 0) > 0)
    expect("rank 1 joined again after the silence, at least once per rebinding (rejoins %d)" % rejoins[1],
           rejoins[1] >= len(REBIND_AT_S))
    if mode == "sessions":
        # Each rank has a session with each server lcore (the job's chunks span both); after each rebinding
        # rank 1 needs a new one with each. Rank 0 may join again too, when its rounds stall meanwhile.
        least = 2 * LCORES + LCORES * len(REBIND_AT_S)
        expect("a new session moved rank 1 to each new binding, at each lcore (sessions_established %d, at least "
               "%d)" % (job.get("sessions_established", 0), least), job.get("sessions_established", 0) >= least)
        expect("no address was proven by a cookie in a sessions job (addresses_proven %d)"
               % job.get("addresses_proven", 0), job.get("addresses_proven", 0) == 0)
    else:
        expect("the server proved each new binding (addresses_proven %d: the first join's and one per rebinding)"
               % job.get("addresses_proven", 0), job.get("addresses_proven", 0) >= 2 + len(REBIND_AT_S))


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    for mode in JOBS:
        run(build, check, mode)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

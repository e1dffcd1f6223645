#!/usr/bin/python3
"""System test of hierarchical aggregation across racks (docs/hierarchy.md) on the emulated datacenter of
tools/testbed: 2 racks x 2 worker hosts, one phub-server per rack hub (DPDK net_af_packet on the hub's eth0,
the kernel's address released), real phub-demo-worker processes, each pointed at its own rack's hub as at a
flat server. Job: allreduce fp32, sum, 4 ranks (0 and 1 in rack 1, 2 and 3 in rack 2).

The hubs reach each other across the core through their rack routers, which answer ARP for the other
rack's addresses (proxy ARP): phub-server has no gateway setting, and a hub finds a peer hub by ARP on a
port whose subnet (here 198.18.0.0/15) holds the peer's address.

Checks (each can fail): both servers start with the racks config; every rank completes its rounds with
every result equal to the sum of the four ranks' exactly representable values (what a flat server gives;
phub-demo-worker checks each element); rank 0's epoch reached hub 2 (its job counters count an epoch taken
from rank 0's hub); both hubs sent and received partials and results and dropped nothing as another
hierarchy or an unverified peer; phub-ctl job and stats --json show each hub the other (fingerprint
equal, reachable, partials counted); the core's interface counters (ip -s link) grew by at least one partial or
result per chunk byte and round in each direction; everything is torn down. Prints the measured figures.
Every process is bounded by a timeout. Addresses: 198.18.0.0/15 only.
Usage: hier_test.py --build BUILD_DIR.
"""
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

ROUNDS = 40
KEYS = [20000, 3000, 1]  # fp32 elements
RANKS = {1: [0, 1], 2: [2, 3]}  # rack -> ranks


def hub_config(net, rack, job):
    """The config of rack `rack`'s hub: phubnet's server config, made hierarchical. Both hubs differ only in
    `rack`, their port's address, their EAL file prefix and control socket."""
    addr = testbed.hub_addr(rack)
    base = net.config_text([job], server_ip=addr, file_prefix="%s-hub%d" % (net.prefix, rack),
                           socket_path=os.path.join(net.tmp, "ctl%d.sock" % rack))
    racks = ", ".join('{ name = "r%d", hub_ipv4 = "%s" }' % (r, testbed.hub_addr(r)) for r in sorted(RANKS))
    ranks = ", ".join('r%d = { %s }' % (r, ", ".join(map(str, RANKS[r]))) for r in sorted(RANKS))
    return ("local c = (function()\n%s\nend)()\n" % base +
            'c.ports[1].ipv4 = "%s/15"  -- the peer hub is on this subnet, behind the proxy-ARP rack router\n' % addr +
            "c.racks = { %s }\n" % racks +
            'c.rack = "r%d"\n' % rack +
            "c.jobs[1].ranks_by_rack = { %s }\n" % ranks +
            "return c\n")


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    lacks = testbed.kernel_lacks()
    if not check("the kernel and tools have what the testbed needs", not lacks, "missing: %s" % ", ".join(lacks)):
        return check.summary()
    demo = os.path.join(build, "tools", "phub-demo", "phub-demo-worker")
    if not check("phub-demo-worker is built (%s)" % demo, os.access(demo, os.X_OK)):
        return check.summary()
    tb = testbed.Testbed(racks=2, hosts_per_rack=2, hubs_per_rack=1, host_offloads=False, core_loss_pct=0,
                         prefix="%sh%d" % (testbed.FAMILY, os.getpid()))
    with tb:
        for r in RANKS:
            # The rack router answers the hub's ARP for the other rack's hub with its own MAC, at once.
            testbed.sh(*tb.exec_argv(tb.ns_rack(r), ["sysctl", "-qw", "net.ipv4.conf.br0.proxy_arp=1",
                                                     "net.ipv4.neigh.br0.proxy_delay=0"]))
        hubs = {r: tb.release_hub_address(r) for r in RANKS}
        net = phubnet.Net(4, build_dir=build, lcores=1, prefix=tb.prefix)  # configs and server start only
        servers, logs = {}, {}
        try:
            job = phubnet.job(1, "H", 4, KEYS, 42100, secret="hier-system-test-secret",
                              allowed_sources=["198.18.1.0/24", "198.18.2.0/24"])
            paths = {}
            for r in RANKS:
                paths[r] = livenet.write(os.path.join(net.tmp, "hub%d.lua" % r), hub_config(net, r, job))
                logs[r] = os.path.join(net.tmp, "hub%d.log" % r)
            for r in RANKS:
                servers[r] = net.launch_server(hubs[r]["ns"], paths[r], logs[r], timeout_s=150)
            check("both hubs' phub-servers start with racks, rack and ranks_by_rack", len(servers) == 2)
            c0 = tb.core_counters()
            procs = []
            for r, ranks in RANKS.items():
                for i, rank in enumerate(ranks):
                    procs.append(tb.popen(tb.ns_host(r, i + 1), [
                        "timeout", "90", demo, "--config", paths[r], "--job", "H", "--rank", str(rank),
                        "--server", hubs[r]["addr"], "--rounds", str(ROUNDS)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            ok, detail = livenet.workers_ok(livenet.finish_workers(procs, 100))
            c1 = tb.core_counters()
            up = {r: c1["r%d" % r]["rx_bytes"] - c0["r%d" % r]["rx_bytes"] for r in RANKS}  # rack r -> core
            # Each hub's view of the other, as phub-ctl shows it: job H's peer line and its JSON row. Both come
            # from the server's counter cache (control.metrics_interval_ms), which may predate the last rounds
            # of a short run: asked again until it shows partials sent, for at most 5 s.
            views = {}
            for r in RANKS:
                ctl = livenet.Ctl(net, socket=os.path.join(net.tmp, "ctl%d.sock" % r))
                deadline = time.monotonic() + 5
                while True:
                    rc, out, err = ctl("job", "H")
                    peer = [ln for ln in out.splitlines() if ln.startswith("hub r%d (%s):" % (3 - r, testbed.hub_addr(3 - r)))]
                    rows = (livenet.job_of(ctl.stats(), "H") or {}).get("hubs", [])
                    if (len(rows) == 1 and rows[0]["partials_sent"] > 0) or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                views[r] = (rc, peer, rows)
                print("hub %d: phub-ctl job H: %s; stats --json hubs: %s" % (r, peer, rows), flush=True)
            check("phub-ctl job and stats --json show the other hub: fingerprint equal, reachable, partials counted",
                  all(rc == 0 and len(peer) == 1 and "fingerprint equal" in peer[0] and "UNREACHABLE" not in peer[0] and
                      len(rows) == 1 and rows[0]["fingerprint"] == "equal" and rows[0]["unreachable"] == 0 and
                      rows[0]["partials_sent"] > 0 for rc, peer, rows in views.values()), str(views))
            rcs = {}
            for r in RANKS:
                net.signal_server(signal.SIGINT, hubs[r]["ns"])
                rcs[r] = servers[r].wait(timeout=30)
            counters = {r: phubnet.parse_counters(open(logs[r]).read()) for r in RANKS}
            jobs = {r: counters[r].get("job H", {}) for r in RANKS}
            drops = {r: counters[r].get("drops", {}) for r in RANKS}
            print("workers: %s" % detail, flush=True)
            print("core: rack 1 -> core +%d B, rack 2 -> core +%d B" % (up[1], up[2]), flush=True)
            for r in RANKS:
                print("hub %d: exit %d, job H: %s" % (r, rcs[r], {k: v for k, v in jobs[r].items() if v}), flush=True)
            check("every rank of both racks completes %d rounds, every result the four ranks' exact sum" % ROUNDS,
                  ok, detail)
            check("both servers stop on SIGINT with exit 0 and print the job's counters",
                  all(rcs[r] == 0 and jobs[r] for r in RANKS), str(rcs))
            check("rank 0's epoch reached hub 2 (an epoch taken from rank 0's hub)",
                  jobs[2].get("hub_epochs_adopted", 0) >= 1 and jobs[1].get("epochs_started", 0) >= 1, str(jobs))
            check("the hubs forwarded partials and results both ways",
                  all(jobs[r].get("partials_sent", 0) > 0 and jobs[r].get("partials_received", 0) > 0 and
                      jobs[r].get("hub_results_sent", 0) > 0 and jobs[r].get("hub_results_received", 0) > 0
                      for r in RANKS), str(jobs))
            check("no forward dropped as another hierarchy or from an unverified peer",
                  all(drops[r].get("fwd_fingerprint_mismatch", 0) == 0 for r in RANKS), str(drops))
            # Each hub sends, per round, the partials of the chunks homed at the other hub and the results of
            # those homed at itself: together about the job's bytes; at least half of them in any case.
            least = ROUNDS * sum(KEYS) * 4 // 2
            check("cross-rack traffic on the core's interfaces: each rack sent >= %d B (%s)" % (least, up),
                  all(up[r] >= least for r in RANKS))
        finally:
            for r in RANKS:
                if r in logs and os.path.exists(logs[r]) and check.failed:
                    print("hub %d log tail:\n%s" % (r, open(logs[r]).read()[-3000:]), flush=True)
            net.down()
    leaks = tb.leaks()
    check("nothing left (namespaces, processes, root nftables tables): %s" % leaks, not any(leaks.values()))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

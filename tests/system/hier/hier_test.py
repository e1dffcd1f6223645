#!/usr/bin/python3
"""System test of hierarchical aggregation across racks (docs/hierarchy.md, issue 15 "Tests") on the emulated
datacenter of tools/testbed: a phub-server per rack hub (DPDK net_af_packet on the hub's eth0, the kernel's
address released), real phub-demo-worker processes, each pointed at its own rack's hub as at a flat server.

phub-demo-worker checks every element of every result against what a flat single server returns for its
data (docs/client.md; tools/phub-demo/pattern.hpp): in allreduce the exact sum (small integers, exact in fp32
and bf16), in ps mode the weights of the flat server's optimizer replayed with lib/agg's scalar kernels,
bit for bit. So "every rank OK with no mismatch" is "equal to a flat run". The matrix, one testbed each:

- equal to flat: 2 racks x 2 workers and 3 racks x 3 workers; allreduce fp32 and bf16; ps with momentum
  (fp32) and with Adam (bf16, and fp32 in deterministic mode);
- loss: 1 % loss on the core links (nftables numgen), every round completes correctly, the rule dropped;
- bytes: cross-rack bytes on the core's interfaces (ip -s link), printed as a ratio to one partial and one
  result per chunk per remote rack plus frame headers (not asserted: forward resends inflate it today);
- a dead hub: rack 2's phub-server killed with SIGKILL mid-run; every rank of both racks exits with a
  named client error (not OK, no mismatch) within a bound, and the surviving hub shows the peer unreachable.

The first case also keeps the checks of the original test: rank 0's epoch reached the other hub, both hubs
forwarded both ways, no fingerprint drop, phub-ctl shows each hub the other. The hubs reach each other
across the core through their rack routers, which answer ARP for the other racks' addresses (proxy ARP):
phub-server has no gateway setting. Every process is bounded by a timeout; everything is torn down even on
failure. Addresses: 198.18.0.0/15 only. Usage: hier_test.py --build BUILD_DIR.
"""
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
import hierbed  # noqa: E402
import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

KEYS = [20000, 3000, 1]  # elements
MOMENTUM = dict(kind="momentum", lr=0.05, momentum=0.9)
ADAM = dict(kind="adam", lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8)
FRAME_HEADER_BYTES = 14 + 20 + 8 + 54  # Ethernet, IPv4, UDP, phub header
MTU = 1500
DEAD_HUB_BOUND_S = 30  # every rank must have its error this long after the kill (client timeout 5 s)
ERRORS = ("unreachable", "timeout", "round_stalled")  # the client's names of what a dead hub can cause


def ranks_of(racks, per_rack):
    return {r: list(range((r - 1) * per_rack, r * per_rack)) for r in range(1, racks + 1)}


def hub_config(net, rack, job, ranks):
    """Rack `rack`'s hub config: phubnet's server config, made hierarchical. The hubs differ only in `rack`,
    their port's address, their EAL file prefix and control socket."""
    addr = testbed.hub_addr(rack)
    base = net.config_text([job], server_ip=addr, file_prefix="%s-hub%d" % (net.prefix, rack),
                           socket_path=os.path.join(net.tmp, "ctl%d.sock" % rack))
    racks = ", ".join('{ name = "r%d", hub_ipv4 = "%s" }' % (r, testbed.hub_addr(r)) for r in sorted(ranks))
    by_rack = ", ".join('r%d = { %s }' % (r, ", ".join(map(str, ranks[r]))) for r in sorted(ranks))
    return ("local c = (function()\n%s\nend)()\n" % base +
            'c.ports[1].ipv4 = "%s/15"  -- the peer hubs are on this subnet, behind the proxy-ARP rack routers\n' % addr +
            "c.racks = { %s }\n" % racks +
            'c.rack = "r%d"\n' % rack +
            "c.jobs[1].ranks_by_rack = { %s }\n" % by_rack +
            "return c\n")


def forward_model_bytes(racks, rounds, dtype):
    """Bytes that must cross the core into it: per round, per chunk and remote rack one fp32 partial and one
    result of the job's dtype, each segment a frame of its own with its headers (hub_state and ARP aside)."""
    elem = 2 if dtype == "bf16" else 4
    per_frame = {4: (MTU - 20 - 8 - 54) // 4, 2: (MTU - 20 - 8 - 54) // 2}
    total = 0
    for e in KEYS:
        partial = 4 * e + math.ceil(e / per_frame[4]) * FRAME_HEADER_BYTES
        result = elem * e + math.ceil(e / per_frame[elem]) * FRAME_HEADER_BYTES
        total += partial + result
    return (racks - 1) * rounds * total


def hub_views(net, ranks, name):
    """Each hub's phub-ctl view of its peers: {rack: (rc, peer lines of `job`, stats --json hubs rows)}. Both
    come from the server's counter cache (control.metrics_interval_ms), which may predate the last rounds of a
    short run: asked again until every peer row shows partials sent, for at most 5 s."""
    views = {}
    for r in ranks:
        ctl = livenet.Ctl(net, socket=os.path.join(net.tmp, "ctl%d.sock" % r))
        deadline = time.monotonic() + 5
        while True:
            rc, out, _ = ctl("job", name)
            peers = [ln for ln in out.splitlines() if ln.startswith("hub r")]
            rows = (livenet.job_of(ctl.stats(), name) or {}).get("hubs", [])
            if (len(rows) == len(ranks) - 1 and all(x["partials_sent"] > 0 for x in rows)) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        views[r] = (rc, peers, rows)
    return views


def run_case(build, check, label, racks, per_rack, mode="allreduce", dtype="fp32", optimizer=None,
             deterministic=False, rounds=20, loss_pct=0, kill_hub=None, first=False):
    demo = os.path.join(build, "tools", "phub-demo", "phub-demo-worker")
    ranks = ranks_of(racks, per_rack)
    workers = racks * per_rack
    print("== case %s: %d racks x %d workers, %s %s%s%s, %d rounds%s" % (
        label, racks, per_rack, mode, dtype, " " + optimizer["kind"] if optimizer else "",
        " deterministic" if deterministic else "", rounds, ", %g %% core loss" % loss_pct if loss_pct else ""), flush=True)
    tb = testbed.Testbed(racks=racks, hosts_per_rack=per_rack, hubs_per_rack=1, host_offloads=False,
                         core_loss_pct=loss_pct, prefix="%sh%d" % (testbed.FAMILY, os.getpid()))
    started = time.time()
    with tb:
        # The rack routers answer a hub's ARP for another rack's hub with their own MAC, at once (testbed.py).
        hubs = {r: tb.release_hub_address(r) for r in ranks}
        net = phubnet.Net(workers, build_dir=build, lcores=1, prefix=tb.prefix)  # configs and server start only
        servers, logs = {}, {}
        try:
            extra = dict(allowed_sources=["198.18.%d.0/24" % r for r in ranks])
            if optimizer:
                extra["optimizer"] = optimizer
            if deterministic:
                extra["deterministic"] = True
            job = phubnet.job(1, "H", workers, KEYS, 42100, mode=mode, dtype=dtype,
                              secret="hier-system-test-secret", **extra)
            paths = {}
            for r in ranks:
                paths[r] = livenet.write(os.path.join(net.tmp, "hub%d.lua" % r), hub_config(net, r, job, ranks))
                logs[r] = os.path.join(net.tmp, "hub%d.log" % r)
            for r in ranks:
                servers[r] = net.launch_server(hubs[r]["ns"], paths[r], logs[r], timeout_s=150)
            c0 = tb.core_counters()
            procs = []
            worker_rounds = 1000000 if kill_hub else rounds
            for r, rs in ranks.items():
                for i, rank in enumerate(rs):
                    procs.append(tb.popen(tb.ns_host(r, i + 1), [
                        "timeout", "90", demo, "--config", paths[r], "--job", "H", "--rank", str(rank),
                        "--server", hubs[r]["addr"], "--rounds", str(worker_rounds), "--timeout-ms", "5000"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            if kill_hub:
                dead_hub_checks(check, label, tb, net, hubs, ranks, procs, kill_hub)
            else:
                ok, detail = livenet.workers_ok(livenet.finish_workers(procs, 100))
                c1 = tb.core_counters()
                into_core = sum(c1["r%d" % r]["rx_bytes"] - c0["r%d" % r]["rx_bytes"] for r in ranks)
                views = hub_views(net, ranks, "H")
                rcs = {}
                for r in ranks:
                    net.signal_server(signal.SIGINT, hubs[r]["ns"])
                    rcs[r] = servers[r].wait(timeout=30)
                counters = {r: phubnet.parse_counters(open(logs[r]).read()) for r in ranks}
                jobs = {r: counters[r].get("job H", {}) for r in ranks}
                drops = {r: counters[r].get("drops", {}) for r in ranks}
                print("workers: %s" % detail, flush=True)
                check("%s: every rank completes %d rounds, every result equal to a flat server's" % (label, rounds), ok, detail)
                check("%s: every hub stops on SIGINT with exit 0 and prints the job's counters" % label,
                      all(rcs[r] == 0 and jobs[r] for r in ranks), str(rcs))
                check("%s: no forward dropped as another hierarchy" % label,
                      all(drops[r].get("fwd_fingerprint_mismatch", 0) == 0 for r in ranks), str(drops))
                sent = sum(jobs[r].get("partials_sent", 0) for r in ranks)
                resent = sum(jobs[r].get("partials_retransmitted", 0) for r in ranks)
                model = forward_model_bytes(racks, rounds, dtype)
                print("%s: bytes into the core %d, model (one partial and one result per chunk per remote rack, "
                      "with frame headers) %d, ratio %.2f; partials sent %d, of them retransmitted %d; %.1f s" % (
                          label, into_core, model, into_core / model, sent, resent, time.time() - started), flush=True)
                check("%s: the hubs forwarded partials and results" % label,
                      all(jobs[r].get("partials_sent", 0) > 0 and jobs[r].get("hub_results_received", 0) > 0 for r in ranks),
                      str(jobs))
                if loss_pct:
                    dropped = tb.core_rule_counters()
                    print("%s: core loss rule dropped %s" % (label, dropped), flush=True)
                    check("%s: the core's loss rule dropped frames" % label,
                          sum(v["in"] + v["out"] for v in dropped.values()) > 0, str(dropped))
                if first:
                    first_case_checks(check, label, ranks, views, jobs, into_core, rounds)
        finally:
            for r in ranks:
                if r in logs and os.path.exists(logs[r]) and check.failed:
                    print("hub %d log tail:\n%s" % (r, open(logs[r]).read()[-3000:]), flush=True)
            for p in locals().get("procs", []):
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)
            net.down()
    leaks = tb.leaks()
    check("%s: nothing left (namespaces, processes, root nftables tables): %s" % (label, leaks), not any(leaks.values()))


def first_case_checks(check, label, ranks, views, jobs, into_core, rounds):
    for r, v in views.items():
        print("hub %d: phub-ctl job H: %s; stats --json hubs: %s" % (r, v[1], v[2]), flush=True)
    check("%s: phub-ctl job and stats --json show each hub the other: fingerprint equal, reachable, partials counted"
          % label, all(rc == 0 and len(peers) == len(ranks) - 1 and all("fingerprint equal" in p and "UNREACHABLE" not in p
                                                                      for p in peers) and
                       len(rows) == len(ranks) - 1 and all(w["fingerprint"] == "equal" and w["unreachable"] == 0 and
                                                           w["partials_sent"] > 0 for w in rows)
                       for rc, peers, rows in views.values()), str(views))
    check("%s: rank 0's epoch reached hub 2 (an epoch taken from rank 0's hub)" % label,
          jobs[2].get("hub_epochs_adopted", 0) >= 1 and jobs[1].get("epochs_started", 0) >= 1, str(jobs))
    check("%s: the hubs received partials and sent results both ways" % label,
          all(jobs[r].get("partials_received", 0) > 0 and jobs[r].get("hub_results_sent", 0) > 0 for r in ranks), str(jobs))
    # At least half the job's bytes per round (one fp32 partial or result per element) entered the core.
    least = rounds * sum(KEYS) * 4 // 2
    check("%s: cross-rack traffic on the core's interfaces >= %d B (%d)" % (label, least, into_core), into_core >= least)


def dead_hub_checks(check, label, tb, net, hubs, ranks, procs, kill_hub):
    time.sleep(3)  # rounds are running
    early = [p for p in procs if p.poll() is not None]
    check("%s: every rank is still running 3 s into the run" % label, not early)
    net.signal_server(signal.SIGKILL, hubs[kill_hub]["ns"])
    killed = time.time()
    exits = {}
    while len(exits) < len(procs) and time.time() - killed < DEAD_HUB_BOUND_S + 30:
        for i, p in enumerate(procs):
            if i not in exits and p.poll() is not None:
                exits[i] = time.time() - killed
        time.sleep(0.05)
    results = livenet.finish_workers(procs, 40)  # `timeout 90` ends any that hang
    views = hub_views(net, {r: None for r in ranks if r != kill_hub}, "H")
    for rank, (rc, s, err) in enumerate(results):
        print("%s: rank %d: exit %d after %s s, status=%s rounds=%s mismatches=%s: %s" % (
            label, rank, rc, "%.1f" % exits[rank] if rank in exits else "-", s.get("status"), s.get("rounds"),
            s.get("mismatches"), err[-200:]), flush=True)
    for r, v in views.items():
        print("%s: surviving hub %d: phub-ctl job H: %s" % (label, r, v[1]), flush=True)
    check("%s: every rank of every rack exits within %d s of the kill with a named client error (%s), "
          "its stderr a message, and no wrong result" % (label, DEAD_HUB_BOUND_S, "/".join(ERRORS)),
          len(exits) == len(procs) and all(t <= DEAD_HUB_BOUND_S for t in exits.values()) and
          all(rc == 1 and s.get("status") in ERRORS and s.get("mismatches") == "0" and int(s.get("rounds", 0)) > 0 and
              "phub-demo-worker rank" in err for rc, s, err in results), str(results))
    check("%s: the surviving hubs show the dead hub unreachable" % label,
          all(rc == 0 and any(p.startswith("hub r%d " % kill_hub) and "UNREACHABLE" in p for p in peers)
              for rc, peers, _ in views.values()), str(views))


def main():
    build, check, ready = hierbed.begin()
    if not ready:
        return check.summary()
    demo = os.path.join(build, "tools", "phub-demo", "phub-demo-worker")
    if not check("phub-demo-worker is built (%s)" % demo, os.access(demo, os.X_OK)):
        return check.summary()
    run_case(build, check, "2x2 allreduce fp32", 2, 2, rounds=40, first=True)
    run_case(build, check, "2x2 allreduce bf16", 2, 2, dtype="bf16")
    run_case(build, check, "2x2 ps momentum fp32", 2, 2, mode="ps", optimizer=MOMENTUM)
    run_case(build, check, "2x2 ps adam bf16", 2, 2, mode="ps", dtype="bf16", optimizer=ADAM)
    run_case(build, check, "3x3 allreduce fp32 deterministic", 3, 3, deterministic=True)
    run_case(build, check, "3x3 allreduce bf16", 3, 3, dtype="bf16")
    run_case(build, check, "3x3 ps momentum fp32", 3, 3, mode="ps", optimizer=MOMENTUM)
    run_case(build, check, "3x3 ps adam fp32 deterministic", 3, 3, mode="ps", optimizer=ADAM, deterministic=True)
    run_case(build, check, "2x2 allreduce fp32, 1 % core loss", 2, 2, loss_pct=1)
    run_case(build, check, "3x3 ps adam fp32, 1 % core loss", 3, 3, mode="ps", optimizer=ADAM, loss_pct=1)
    run_case(build, check, "2x2 allreduce fp32, rack 2's hub killed", 2, 2, kill_hub=2)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

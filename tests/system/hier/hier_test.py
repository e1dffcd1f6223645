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
- bytes: cross-rack bytes on the core's interfaces (ip -s link) of every loss-free case are within BYTES_MARGIN
  of one partial and one result per chunk per remote rack and round plus frame headers, and in ps mode the
  one-time transfers (rank 0's init to the homes, every rack's initial weights); the hub counters that say
  what else crossed (resent partials and results, weights requests and answers, hub_state) are printed;
- a dead hub, a fault-matrix entry (FAULT rack-hub-kill, tests/system/faults/faultmatrix.py): rack 2's
  phub-server killed with SIGKILL mid-run; every rank of both racks exits with a named client error (not OK,
  no mismatch) within a bound, and the surviving hub shows the peer unreachable. Then the killed hub starts
  again with the same config in the same namespace, every rank of both racks starts again (rank 0 restarts the
  job in a new epoch, which the restarted hub takes from the surviving one), and 20 rounds complete right;
  recovery is timed from the restart to the restarted hub's first completed round (its own stats samples).
  The same in a ps job (momentum), whose killed hub is the home of half the chunks and dies with their
  weights and momentum: every rank a named error within the bound, never a hang; the rerun starts with fresh
  weights (a ps job spread over racks is not checkpointed: docs/persistence.md). And once more with the home
  hub started again right after the kill, while the ranks still run: it takes the job's epoch from the other
  hub but has no weights, so the ranks end with named errors (not_initialized at its rack, round_stalled at
  the other) at their deadline, none wrong.

The first case also keeps the checks of the original test: rank 0's epoch reached the other hub, both hubs
forwarded both ways, no fingerprint drop, phub-ctl shows each hub the other. The hubs reach each other
across the core through their rack routers, which answer ARP for the other racks' addresses (proxy ARP):
phub-server has no gateway setting. Every process is bounded by a timeout; everything is torn down even on
failure. Addresses: 198.18.0.0/15 only. Usage: hier_test.py --build BUILD_DIR.
"""
import math
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
import testbed  # noqa: E402
import hierbed  # noqa: E402
import livenet  # noqa: E402
from faultmatrix import Matrix, Sampler, errors_of, rounds_of, wrong_of  # noqa: E402
from livenet import phubnet  # noqa: E402

KEYS = [20000, 3000, 1]  # elements
MOMENTUM = dict(kind="momentum", lr=0.05, momentum=0.9)
ADAM = dict(kind="adam", lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8)
FRAME_HEADER_BYTES = 14 + 20 + 8 + 54  # Ethernet, IPv4, UDP, phub header
HUB_STATE_FRAME_BYTES = FRAME_HEADER_BYTES + 64
# Cross-rack bytes of a loss-free case may exceed the model by this share. Beyond the model cross: hub_state
# messages (one per lcore and peer every 100 ms, every 10 ms until the peer echoes: 0.1-1 % of the model),
# ARP, ps's header-only weights requests, and partials sent again, with the home's answers. Without loss a
# rack hub resends only when its home has sent it no result for a whole resend timeout: the home is waiting
# for another rack, one of whose 2-3 workers this 2-CPU box (twelve processes, other helpers' builds) has not
# run for longer than the timeout. The home then holds the resent partials already and drops them as
# duplicates (docs/hierarchy.md, "Retransmit"). Measured up to 1.15 (3x3 fp32, load average 11.8); before
# the fixes of issue 15's bytes (the weights flood, resends while results were still arriving) 1.24-1.70 for
# 3x3 ps momentum, which this bound fails.
BYTES_MARGIN = 0.20
# What the hubs counted must explain the bytes: the model plus every resend, weights answer and request and
# hub_state the counters show, within this share of the model (ARP, frames of a piece smaller than full).
UNEXPLAINED_MARGIN = 0.01
MTU = 1500
DEAD_HUB_BOUND_S = 30  # every rank must have its error this long after the kill (client timeout 5 s)
# The client's names of what a dead hub can cause; not_initialized: a ps home hub that came back without its
# chunks' weights (restarted at once, while the ranks still run).
ERRORS = ("unreachable", "timeout", "round_stalled", "not_initialized")
METRICS_MS = 50  # control.metrics_interval_ms of the killed-hub case: its recovery is timed from these samples
RECOVERY_ROUNDS = 20  # rounds every rank runs after the killed hub's restart
# Recovery bound: the restarted hub's boot (0.3-0.4 s measured), the ranks' start and join, the epoch reaching
# it (hub_state, resent every 10 ms), one round; and at worst a partial or two that the restarted hub dropped
# before it held the epoch, sent again by the surviving hub only after its resend timeout towards it, which
# the dead period left at its 2 s maximum (docs/hierarchy.md, "Retransmit"). Two such waits are 4 s; the rest
# is slack for a loaded 2-CPU box. Measured 0.38-0.54 s.
RECOVERY_BOUND_S = 8


def ranks_of(racks, per_rack):
    return {r: list(range((r - 1) * per_rack, r * per_rack)) for r in range(1, racks + 1)}


def hub_config(net, rack, job, ranks, settings=None):
    """Rack `rack`'s hub config: phubnet's server config (settings: its overrides), made hierarchical. The hubs
    differ only in `rack`, their port's address, their EAL file prefix and control socket."""
    addr = testbed.hub_addr(rack)
    base = net.config_text([job], server_ip=addr, file_prefix="%s-hub%d" % (net.prefix, rack),
                           socket_path=ctl_socket(net, rack), settings=settings)
    racks = ", ".join('{ name = "r%d", hub_ipv4 = "%s" }' % (r, testbed.hub_addr(r)) for r in sorted(ranks))
    by_rack = ", ".join('r%d = { %s }' % (r, ", ".join(map(str, ranks[r]))) for r in sorted(ranks))
    return ("local c = (function()\n%s\nend)()\n" % base +
            'c.ports[1].ipv4 = "%s/15"  -- the peer hubs are on this subnet, behind the proxy-ARP rack routers\n' % addr +
            "c.racks = { %s }\n" % racks +
            'c.rack = "r%d"\n' % rack +
            "c.jobs[1].ranks_by_rack = { %s }\n" % by_rack +
            "return c\n")


def ctl_socket(net, rack):
    return os.path.join(net.tmp, "ctl%d.sock" % rack)


def start_workers(tb, demo, paths, hubs, ranks, rounds, timeout_s, extra=()):
    """phub-demo-worker for every rank, each in its rack's host namespace and pointed at its rack's hub, under
    `timeout timeout_s`; not waited for."""
    procs = []
    for r, rs in ranks.items():
        for i, rank in enumerate(rs):
            procs.append(tb.popen(tb.ns_host(r, i + 1), [
                "timeout", str(timeout_s), demo, "--config", paths[r], "--job", "H", "--rank", str(rank),
                "--server", hubs[r]["addr"], "--rounds", str(rounds), "--timeout-ms", "5000"] + list(extra),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def forward_model_bytes(racks, rounds, dtype, mode="allreduce"):
    """Bytes that must cross the core into it: per round, per chunk and remote rack one fp32 partial and one
    result of the job's dtype, each segment a frame of its own with its headers (hub_state and ARP aside).
    In ps mode also, once: every element's weights to each rack but its home's ((racks - 1) x the job in the
    job's dtype: each element has one home), and rank 0's init of the elements homed outside its rack to their
    homes (about (racks - 1) / racks of the job: homes are spread within one chunk per lcore)."""
    elem = 2 if dtype == "bf16" else 4
    per_frame = {4: (MTU - 20 - 8 - 54) // 4, 2: (MTU - 20 - 8 - 54) // 2}
    partials = results = 0
    for e in KEYS:
        partials += 4 * e + math.ceil(e / per_frame[4]) * FRAME_HEADER_BYTES
        results += elem * e + math.ceil(e / per_frame[elem]) * FRAME_HEADER_BYTES
    total = (racks - 1) * rounds * (partials + results)
    if mode == "ps":
        total += (racks - 1) * results + (racks - 1) * results // racks
    return total


def counted_extra_bytes(total, racks, dtype):
    """Frame bytes beyond forward_model_bytes that the hubs' summed counters `total` account for, each frame
    taken at its largest: partial pieces and round results sent again, weights answers and forwarded inits
    beyond the one each needed segment gets, header-only weights requests, hub_state messages."""
    elem = 2 if dtype == "bf16" else 4
    payload = MTU - 20 - 8 - 54
    partial = FRAME_HEADER_BYTES + payload // 4 * 4
    result = FRAME_HEADER_BYTES + payload // elem * elem
    segments = sum(math.ceil(e / (payload // elem)) for e in KEYS)
    inits_needed = (racks - 1) * segments // racks
    return (total["partials_retransmitted"] * partial + total["hub_results_resent"] * result +
            max(0, total["weights_sent"] - total["weights_received"]) * result +
            max(0, total["inits_forwarded"] - inits_needed) * result +
            total["weights_requested"] * FRAME_HEADER_BYTES + total["hub_states_sent"] * HUB_STATE_FRAME_BYTES)


def hub_views(net, ranks, name):
    """Each hub's phub-ctl view of its peers: {rack: (rc, peer lines of `job`, stats --json hubs rows)}. Both
    come from the server's counter cache (control.metrics_interval_ms), which may predate the last rounds of a
    short run: asked again until every peer, in both views, shows partials sent, for at most 5 s (each view is
    its own request: the cache may change between them)."""
    views = {}
    for r in ranks:
        ctl = livenet.Ctl(net, socket=ctl_socket(net, r))
        deadline = time.monotonic() + 5
        while True:
            rc, out, _ = ctl("job", name)
            peers = [ln for ln in out.splitlines() if ln.startswith("hub r")]
            rows = (livenet.job_of(ctl.stats(), name) or {}).get("hubs", [])
            sent = [int(m.group(1)) for m in (re.search(r"partials_sent (\d+)", ln) for ln in peers) if m]
            both = len(rows) == len(ranks) - 1 and all(x["partials_sent"] > 0 for x in rows) and \
                len(sent) == len(ranks) - 1 and all(n > 0 for n in sent)
            if both or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        views[r] = (rc, peers, rows)
    return views


def run_case(build, check, label, racks, per_rack, mode="allreduce", dtype="fp32", optimizer=None,
             deterministic=False, rounds=20, loss_pct=0, kill_hub=None, restart_at_once=False, mx=None, first=False):
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
            # The killed-hub case samples the restarted hub's counters for its recovery every METRICS_MS.
            settings = dict(control=dict(metrics_interval_ms=METRICS_MS)) if kill_hub else None
            for r in ranks:
                paths[r] = livenet.write(os.path.join(net.tmp, "hub%d.lua" % r),
                                         hub_config(net, r, job, ranks, settings))
                logs[r] = os.path.join(net.tmp, "hub%d.log" % r)
            for r in ranks:
                servers[r] = net.launch_server(hubs[r]["ns"], paths[r], logs[r], timeout_s=150)
            c0 = tb.core_counters()
            procs = start_workers(tb, demo, paths, hubs, ranks, 1000000 if kill_hub else rounds, 90)
            if kill_hub:
                # The restarted hub: the same config in the same namespace, started as above, its own log.
                logs["restart"] = os.path.join(net.tmp, "hub%d-restart.log" % kill_hub)
                restart = (lambda: net.launch_server(hubs[kill_hub]["ns"], paths[kill_hub], logs["restart"],
                                                     timeout_s=90))
                # A ps job's rerun starts with fresh weights: the killed home hub's chunks lost theirs (a ps job
                # spread over racks is not checkpointed), and the ranks verify from their own initial weights.
                rerun = (lambda: start_workers(tb, demo, paths, hubs, ranks, RECOVERY_ROUNDS, 60,
                                               ["--fresh-weights"] if mode == "ps" else []))
                procs = dead_hub_checks(check, label, net, hubs, ranks, procs, kill_hub, restart, rerun, mx,
                                        restart_at_once, "hub-kill-ps" if mode == "ps" else "rack-hub-kill")
            else:
                results = livenet.finish_workers(procs, 100)
                ok, detail = livenet.workers_ok(results)
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
                # Results the client refused (a session's answers it could not open) and its joins after silence.
                print("workers: bad_tag by rank %s, rejoins by rank %s" % (
                    [int(s.get("bad_tag", 0)) for _, s, _ in results], [int(s.get("rejoins", 0)) for _, s, _ in results]),
                      flush=True)
                if not ok:  # what each hub saw of its peers when the ranks ended
                    for r, v in views.items():
                        print("hub %d: phub-ctl job H: %s" % (r, v[1]), flush=True)
                check("%s: every rank completes %d rounds, every result equal to a flat server's" % (label, rounds), ok, detail)
                check("%s: every hub stops on SIGINT with exit 0 and prints the job's counters" % label,
                      all(rcs[r] == 0 and jobs[r] for r in ranks), str(rcs))
                check("%s: no forward dropped as another hierarchy" % label,
                      all(drops[r].get("fwd_fingerprint_mismatch", 0) == 0 for r in ranks), str(drops))
                total = {k: sum(jobs[r].get(k, 0) for r in ranks) for k in (
                    "partials_sent", "partials_retransmitted", "hub_results_sent", "hub_results_resent",
                    "resends_postponed", "inits_forwarded", "weights_requested", "weights_sent", "weights_received",
                    "hub_states_sent")}
                model = forward_model_bytes(racks, rounds, dtype, mode)
                ratio = into_core / model
                print("%s: bytes into the core %d, model (one partial and one result per chunk per remote rack and "
                      "round, with frame headers%s) %d, ratio %.3f; hub_state about %d B; counters of all hubs: %s; "
                      "%.1f s" % (label, into_core, ", ps's init and initial weights" if mode == "ps" else "", model,
                                  ratio, total["hub_states_sent"] * HUB_STATE_FRAME_BYTES, total,
                                  time.time() - started), flush=True)
                explained = model + counted_extra_bytes(total, racks, dtype)
                print("%s: model plus the counted resends, weights transfers beyond the model and hub_state: %d, "
                      "bytes into the core %.3f of it" % (label, explained, into_core / explained), flush=True)
                check("%s: every byte into the core is the model or counted by the hubs (%d <= %d + %g %% of the "
                      "model; and >= %g %% of the model)" % (label, into_core, explained, 100 * UNEXPLAINED_MARGIN,
                                                            100 * (1 - UNEXPLAINED_MARGIN)),
                      (1 - UNEXPLAINED_MARGIN) * model <= into_core <= explained + UNEXPLAINED_MARGIN * model, str(total))
                if not loss_pct:
                    check("%s: bytes into the core within %g %% of the model (ratio %.3f)" % (
                        label, 100 * BYTES_MARGIN, ratio), ratio <= 1 + BYTES_MARGIN, str(total))
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
            for r, path in logs.items():
                if os.path.exists(path) and check.failed:
                    print("hub %s log tail:\n%s" % (r, open(path).read()[-3000:]), flush=True)
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
    # The job has a secret, so its ranks run sessions with their rack hub (docs/hierarchy.md).
    check("%s: the ranks ran sessions with their rack hubs (sessions_established %s)"
          % (label, [jobs[r].get("sessions_established", 0) for r in ranks]),
          all(jobs[r].get("sessions_established", 0) > 0 for r in ranks))
    check("%s: the hubs received partials and sent results both ways" % label,
          all(jobs[r].get("partials_received", 0) > 0 and jobs[r].get("hub_results_sent", 0) > 0 for r in ranks), str(jobs))
    # At least half the job's bytes per round (one fp32 partial or result per element) entered the core.
    least = rounds * sum(KEYS) * 4 // 2
    check("%s: cross-rack traffic on the core's interfaces >= %d B (%d)" % (label, least, into_core), into_core >= least)


def dead_hub_checks(check, label, net, hubs, ranks, procs, kill_hub, restart, rerun, mx, restart_at_once, fault):
    """Kills hub `kill_hub` 3 s into the run (SIGKILL), checks that every rank ends with a named error in
    time, then restarts it (`restart()`) and the ranks of every rack (`rerun()`): the FAULT line's recovery
    is from the restart to the first round the restarted hub completes. With restart_at_once the hub starts
    again right after the kill, while the ranks still run (its state is gone: the same named errors, in time,
    and no wrong result). Returns the processes last started."""
    time.sleep(3)  # rounds are running
    early = [p for p in procs if p.poll() is not None]
    check("%s: every rank is still running 3 s into the run" % label, not early)
    net.signal_server(signal.SIGKILL, hubs[kill_hub]["ns"])
    killed = time.time()
    boot_s = None
    if restart_at_once:
        restart()
        boot_s = time.time() - killed
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
    if not restart_at_once:
        check("%s: the surviving hubs show the dead hub unreachable" % label,
              all(rc == 0 and any(p.startswith("hub r%d " % kill_hub) and "UNREACHABLE" in p for p in peers)
                  for rc, peers, _ in views.values()), str(views))

    # Recovery: every rank has exited; the killed hub's phub-server starts again, then every rank of every rack
    # (rank 0 restarts the job in a new epoch at its hub, which the restarted hub takes from its hub_state).
    sampler = Sampler(net, METRICS_MS, socket=ctl_socket(net, kill_hub))  # fails quietly until the hub is up
    try:
        t_restart = time.time()
        if not restart_at_once:
            restart()
            boot_s = time.time() - t_restart
        again = rerun()
        after = livenet.finish_workers(again, 70)  # `timeout 60` ends any that hang
    finally:
        sampler.stop()
    ok, detail = livenet.workers_ok(after)
    recovery = sampler.recovery("H", t_restart, new_server=True)
    print("%s: after the restart (ready %.1f s after it): %s" % (label, boot_s, detail), flush=True)
    views = hub_views(net, ranks, "H")
    restarted = livenet.job_of(livenet.Ctl(net, socket=ctl_socket(net, kill_hub)).stats(), "H") or {}
    print("%s: the restarted hub %d: epoch %s, epochs adopted %s" % (
        label, kill_hub, restarted.get("epoch"), restarted.get("hub_epochs_adopted")), flush=True)
    check("%s: the restarted hub took rank 0's new epoch from the surviving hub (hub_epochs_adopted %s)" % (
        label, restarted.get("hub_epochs_adopted")), restarted.get("hub_epochs_adopted", 0) >= 1)
    check("%s: after hub %d's restart every rank of every rack completes %d rounds, every result right" % (
        label, kill_hub, RECOVERY_ROUNDS), ok and all(int(s.get("rounds", 0)) == RECOVERY_ROUNDS for _, s, _ in after),
          detail)
    check("%s: recovery (hub %d's restart to its first completed round) %s within %d s" % (
        label, kill_hub, "-" if recovery is None else "%.2f s" % recovery, RECOVERY_BOUND_S),
          recovery is not None and recovery <= RECOVERY_BOUND_S)
    check("%s: after the restart every hub shows the others reachable, fingerprint equal" % label,
          all(rc == 0 and len(peers) == len(ranks) - 1 and all("fingerprint equal" in p and "UNREACHABLE" not in p
                                                               for p in peers) for rc, peers, _ in views.values()),
          str(views))
    statuses = sorted(set(s.get("status") for _, s, _ in results))
    mx.line(fault, rounds_of(results) + rounds_of(after), wrong_of(results) + wrong_of(after),
            len(errors_of(results)) + len(errors_of(after)), recovery,
            "%d rounds before the kill, %d after; errors: the ranks' %s; recovery from %s (hub %d ready after "
            "%.1f s) to its first completed round" % (
                rounds_of(results), rounds_of(after), "/".join(statuses),
                "the new run's start" if restart_at_once else "the hub's restart", kill_hub, boot_s))
    return again


# The matrix: (label, racks, workers per rack, run_case's keywords).
CASES = [
    ("2x2 allreduce fp32", 2, 2, dict(rounds=40, first=True)),
    ("2x2 allreduce bf16", 2, 2, dict(dtype="bf16")),
    ("2x2 ps momentum fp32", 2, 2, dict(mode="ps", optimizer=MOMENTUM)),
    ("2x2 ps adam bf16", 2, 2, dict(mode="ps", dtype="bf16", optimizer=ADAM)),
    ("3x3 allreduce fp32 deterministic", 3, 3, dict(deterministic=True)),
    ("3x3 allreduce bf16", 3, 3, dict(dtype="bf16")),
    ("3x3 ps momentum fp32", 3, 3, dict(mode="ps", optimizer=MOMENTUM)),
    ("3x3 ps adam fp32 deterministic", 3, 3, dict(mode="ps", optimizer=ADAM, deterministic=True)),
    ("2x2 allreduce fp32, 1 % core loss", 2, 2, dict(loss_pct=1)),
    ("3x3 ps adam fp32, 1 % core loss", 3, 3, dict(mode="ps", optimizer=ADAM, loss_pct=1)),
    ("2x2 allreduce fp32, rack 2's hub killed", 2, 2, dict(kill_hub=2)),
    # Rack 2's hub is the home of half the chunks: their weights and momentum die with it.
    ("2x2 ps momentum fp32, rack 2's home hub killed", 2, 2, dict(mode="ps", optimizer=MOMENTUM, kill_hub=2)),
    ("2x2 ps momentum fp32, rack 2's home hub killed and restarted at once", 2, 2,
     dict(mode="ps", optimizer=MOMENTUM, kill_hub=2, restart_at_once=True)),
]


def main():
    """Every case once; or, to measure one case's rate of failure, PHUB_HIER_ONLY=LABEL (exact) and
    PHUB_HIER_REPEAT=N run only that case N times (docs/hierarchy.md gives the command)."""
    only = os.environ.get("PHUB_HIER_ONLY")
    repeat = int(os.environ.get("PHUB_HIER_REPEAT", "1"))
    build, check, ready = hierbed.begin()
    if not ready:
        return check.summary()
    demo = os.path.join(build, "tools", "phub-demo", "phub-demo-worker")
    if not check("phub-demo-worker is built (%s)" % demo, os.access(demo, os.X_OK)):
        return check.summary()
    chosen = [c for c in CASES if only is None or c[0] == only]
    if not check("PHUB_HIER_ONLY names a case (%s)" % only, chosen):
        return check.summary()
    mx = Matrix(check)
    for i in range(repeat):
        for label, racks, per_rack, kw in chosen:
            run_case(build, check, label + (" #%d" % (i + 1) if repeat > 1 else ""), racks, per_rack, mx=mx, **kw)
    if mx.lines:
        print("\n".join(mx.lines), flush=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

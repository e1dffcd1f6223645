#!/usr/bin/python3
"""A tenant restarts its training without a server restart (job epochs), against the real phub-server.

On one server (af_packet, workers in namespaces) three jobs run side by side:
  steady   2 ranks of phub-demo-worker run for the whole test; every result element is verified and the
           run must end with no error and no retransmit timeout caused by the others' restarts
  ar       4 ranks run, then every one of them is stopped mid-round: three by SIGKILL, one by SIGSTOP (a
           frozen old worker that comes back later). A new run of 4 ranks starts at round 0 and must
           finish with every element verified. The frozen worker, resumed, must fail with the client's
           'epoch' error (its job was restarted), and the server must have counted its packets as
           epoch_mismatch drops instead of mixing them into the new rounds.
  ps       2 ranks (Adam), killed mid-round; a new run started with --fresh-weights verifies every
           update from its own initial weights.
Usage: restart_test.py --build BUILD_DIR   (root; removes every namespace and process, also on failure)
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import phubnet  # noqa: E402
from phubnet import job  # noqa: E402

KEYS = [30000, 4097, 1]


def start(net, name, ranks, args, timeout_s):
    """phub-demo-worker for each rank (rank i in worker namespace i % 4), not waited for."""
    procs = []
    for rank in ranks:
        argv = [net.exe("tools/phub-demo/phub-demo-worker"), "--config", net.config_path, "--job", name, "--rank",
                str(rank), "--server", phubnet.SERVER_IP] + list(args)
        procs.append(net.popen(rank % net.workers, ["timeout", str(timeout_s)] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE))
    return procs


def finish(procs, timeout_s):
    out = []
    for p in procs:
        so, se = p.communicate(timeout=timeout_s)
        out.append((p.returncode, phubnet.parse_summary(so), se.strip()))
    return out


def worker_pids(procs):
    """The phub-demo-worker processes under `ip netns exec ... timeout` (the Popen objects are the wrappers)."""
    pids = []
    for p in procs:
        for _ in range(50):
            kids = subprocess.run(["pgrep", "-f", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
            grandkids = [g for k in kids for g in
                         subprocess.run(["pgrep", "-P", k], capture_output=True, text=True).stdout.split()]
            named = [q for q in kids + grandkids if "phub-demo-worker" in open("/proc/%s/cmdline" % q).read()]
            if named:
                pids.append(int(named[0]))
                break
            time.sleep(0.05)
    return pids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("restart test: needs root (namespaces, af_packet)")
        return 1
    checks = []

    def check(name, ok, detail):
        checks.append(ok)
        print("%s %-44s %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    jobs = [job(1, "steady", 2, KEYS, 42100, reduce="sum", secret="steady-secret-0123"),
            job(2, "ar", 4, KEYS, 42200, reduce="mean", secret="ar-secret-456789"),
            job(3, "ps", 2, KEYS, 42300, mode="ps", optimizer=dict(kind="adam", lr=0.01))]
    with phubnet.Net(4, build_dir=a.build) as net:
        net.start_server(jobs, round_stall_ms=500)
        steady = start(net, "steady", range(2), ["--seconds", "14"], 60)
        run1 = start(net, "ar", range(4), ["--rounds", "1000000", "--timeout-ms", "60000"], 60)
        ps1 = start(net, "ps", range(2), ["--rounds", "1000000"], 60)
        time.sleep(2.5)  # both runs deep in their rounds
        pids = worker_pids(run1)
        ps_pids = worker_pids(ps1)
        ok = len(pids) == 4 and len(ps_pids) == 2
        check("old runs found", ok, "ar pids %s, ps pids %s" % (pids, ps_pids))
        if not ok:
            return 1
        os.kill(pids[2], signal.SIGSTOP)  # frozen mid-round; comes back after the restart
        for pid in pids[:2] + pids[3:] + ps_pids:
            os.kill(pid, signal.SIGKILL)
        for p in [run1[i] for i in (0, 1, 3)] + ps1:
            p.wait(timeout=20)

        t0 = time.time()
        run2 = finish(start(net, "ar", range(4), ["--rounds", "40"], 60), 90)
        took = time.time() - t0
        bad = [(r, s.get("status"), e[-200:]) for r, (rc, s, e) in enumerate(run2) if rc != 0]
        check("restarted ar job verifies every element", not bad and all(s.get("mismatches") == "0" for _, s, _ in run2),
              "4 ranks x %s rounds in %.1fs%s" % (run2[0][1].get("rounds"), took, "" if not bad else ": %s" % bad))
        ps2 = finish(start(net, "ps", range(2), ["--rounds", "30", "--fresh-weights"], 60), 90)
        bad = [(r, s.get("status"), e[-200:]) for r, (rc, s, e) in enumerate(ps2) if rc != 0]
        check("restarted ps job (fresh weights) verifies", not bad,
              "2 ranks x %s rounds%s" % (ps2[0][1].get("rounds"), "" if not bad else ": %s" % bad))

        os.kill(pids[2], signal.SIGCONT)
        (rc, s, err), = finish([run1[2]], 40)
        check("frozen old worker gets the epoch error", rc != 0 and s.get("status") == "epoch",
              "status %s: %s" % (s.get("status"), err[-160:]))

        st = finish(steady, 60)
        bad = [(r, s.get("status"), e[-200:]) for r, (rc, s, e) in enumerate(st) if rc != 0]
        check("the other job never noticed", not bad and all(s.get("mismatches") == "0" for _, s, _ in st),
              "2 ranks x %s rounds, timeouts %s%s" % (st[0][1].get("rounds"), [s.get("timeouts") for _, s, _ in st],
                                                      "" if not bad else ": %s" % bad))
        counters, log = net.stop_server()
        ar = counters.get("job ar", {})
        drops = counters.get("drops", {})
        check("server counted the restarts and old-epoch packets",
              ar.get("epochs_started", 0) >= 2 and drops.get("epoch_mismatch", 0) > 0,
              "job ar epochs_started %s (per lcore), epoch_mismatch drops %s" % (ar.get("epochs_started"),
                                                                               drops.get("epoch_mismatch")))
        if not all(checks):
            print(log[-3000:])
    passed = sum(checks)
    print("restart test: %d passed, %d failed" % (passed, len(checks) - passed))
    return 0 if checks and all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())

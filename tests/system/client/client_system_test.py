#!/usr/bin/python3
"""The client library against the real phub-server (af_packet on a veth, workers in network namespaces).

One server carries a job per case; cases run one after the other:
  allreduce sum / mean (3 workers: fp32(1/3) rounding) / bf16 mean, deterministic fp32, ps adam fp32,
  ps momentum bf16 - every result element checked by phub-demo-worker against independently computed values;
  deterministic and non-deterministic float data through the Python package (bit-exact vs within 1e-6),
  also split into push then pull; blocking (--sync) next to asynchronous operations;
  errors the real server causes: reduction mismatch, rounds out of step, chunk map mismatch, ps pull
  before init, a round stalled on a missing worker - each must come back as its own code;
  2% loss each way plus duplication (nftables on the worker veths) and client-side reordering - every
  round still completes with correct results;
  tenants: a worker with a wrong secret gets no answer (client: 'unreachable' with the auth hint, server:
  drops bad_tag) while another job on the same server is unaffected.
Usage: client_system_test.py --build BUILD_DIR   (root; cleans up every namespace and process)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import phubnet  # noqa: E402
from phubnet import job  # noqa: E402

KEYS = [100000, 4097, 1]  # chunks of 8192 fp32 elements: 13 + 1 + 1, with short last chunks and segments
LOSSY_PORT = 40700


def jobs():
    return [
        job(1, "ar-sum", 4, KEYS, 40100, reduce="sum", secret="s1"),
        job(2, "ar-mean3", 3, KEYS, 40200, reduce="mean"),
        job(3, "ar-bf16", 4, KEYS, 40300, reduce="mean", dtype="bf16", secret="s3"),
        job(4, "ar-det", 4, KEYS, 40400, reduce="mean", deterministic=True),
        job(5, "ps-adam", 2, KEYS, 40500, mode="ps", secret="s5",
            optimizer=dict(kind="adam", lr=0.01, weight_decay=0.01, adamw=True)),
        job(6, "ps-bf16", 4, KEYS, 40600, mode="ps", dtype="bf16", reduce="mean",
            optimizer=dict(kind="momentum", lr=0.05, momentum=0.9)),
        job(7, "lossy", 4, KEYS, LOSSY_PORT, reduce="sum", secret="s7"),
        job(8, "tenant-good", 1, KEYS, 40800, secret="good"),
        job(9, "tenant-bad", 1, KEYS, 40900, secret="right"),
        job(10, "py-det", 4, KEYS, 41000, reduce="mean", deterministic=True, secret="s10"),
        job(11, "py-fast", 4, KEYS, 41100, reduce="sum"),
        job(12, "err-sum", 1, KEYS, 41200, reduce="sum"),
        job(13, "err-ps", 2, KEYS, 41300, mode="ps", optimizer=dict(kind="sgd", lr=0.1)),
        job(14, "err-stall", 2, KEYS, 41400, reduce="sum"),
        job(15, "py-split", 4, KEYS, 41500, reduce="sum"),
        job(16, "ar-sync", 2, KEYS, 41600, reduce="mean"),
        job(17, "err-round", 1, KEYS, 41700, reduce="sum"),
    ]


class Failed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failed(what)


def check_demo(results, what):
    for rc, summary, err in results:
        expect(rc == 0 and summary.get("status") == "OK" and summary.get("mismatches") == "0",
               "%s: rank %s: rc %d %s %s" % (what, summary.get("rank"), rc, summary, err))
    return results


def demo_case(net, name, workers, rounds, extra=()):
    res = check_demo(net.demo_workers(name, range(workers), ["--rounds", str(rounds)] + list(extra)), name)
    return "%d ranks x %s rounds verified, %s retransmits" % (
        workers, rounds, sum(int(s["retransmits"]) for _, s, _ in res))


def python_env(net, port_base, job_id, secret, reduce, workers, timeout_ms=20000, mode="allreduce"):
    return {"PYTHONPATH": os.path.join(net.build, "lib", "client", "python"), "PHUB_SERVER": phubnet.SERVER_IP,
            "PHUB_PORT_BASE": str(port_base), "PHUB_JOB": str(job_id), "PHUB_SECRET": secret, "PHUB_LCORES": "2",
            "PHUB_REDUCE": reduce, "WORLD_SIZE": str(workers), "PHUB_TIMEOUT_MS": str(timeout_ms), "PHUB_MODE": mode}


def python_case(net, name, port_base, job_id, secret, reduce, exact, rounds=4, split=False):
    env = python_env(net, port_base, job_id, secret, reduce, 4)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_worker.py")
    procs = []
    for rank in range(4):
        e = dict(env, RANK=str(rank))
        argv = ["timeout", "120", "/usr/bin/python3", script, ",".join(map(str, KEYS)), str(rounds),
                "exact" if exact else "close", "split" if split else "allreduce"]
        procs.append(net.popen(rank, argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    worst = 0.0
    for p in procs:
        out, err = p.communicate(timeout=150)
        expect(p.returncode == 0, "%s: python worker failed (%d): %s %s" % (name, p.returncode, out, err[-2000:]))
        r = json.loads(out.strip().splitlines()[-1])
        worst = max(worst, r["worst"])
    return "4 ranks x %d rounds%s, %s, worst error %.2g of the fp32 summation bound" % (
        rounds, " (push, then pull)" if split else "", "bit-exact" if exact else "within bound", worst)


def error_case(net):
    """Each mistake, made against the real server, comes back as its error code."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_errors.py")
    runs = [  # (case, port_base, job id, reduce, workers, mode, expected code)
        ("reduce", 41200, 12, "sum", 1, "allreduce", "config_mismatch"),
        ("round", 41700, 17, "sum", 1, "allreduce", "epoch"),
        ("restart", 41700, 17, "sum", 1, "allreduce", "ok"),
        ("chunk_map", 41200, 12, "sum", 1, "allreduce", "chunk_map"),
        ("not_initialized", 41300, 13, "mean", 2, "ps", "not_initialized"),
        ("stalled", 41400, 14, "sum", 2, "allreduce", "round_stalled"),
    ]
    seen = []
    for case, port, jid, reduce, workers, mode, want in runs:
        env = dict(python_env(net, port, jid, "", reduce, workers, timeout_ms=4000, mode=mode), RANK="1" if case ==
                   "not_initialized" else "0")
        p = net.popen(0, ["timeout", "60", "/usr/bin/python3", script, case, ",".join(map(str, KEYS))], env=env,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=90)
        expect(p.returncode == 0 and out.strip(), "errors: %s: worker failed (%d): %s" % (case, p.returncode, err[-2000:]))
        r = json.loads(out.strip().splitlines()[-1])
        expect(r["code"] == want, "errors: %s: expected %s, got %s: %s" % (case, want, r["code"], r["message"]))
        seen.append("%s->%s" % (case, r["code"]))
    return ", ".join(seen)


def nft_lossy(net, on):
    """2% drop each way and 1% duplication of the lossy job's packets on every worker veth (nftables)."""
    if shutil.which("nft") is None:
        raise Failed("nftables (nft) is missing: cannot inject loss on the veths")
    lo, hi = LOSSY_PORT, LOSSY_PORT + 1
    rules = ("table netdev phubloss {\n"
             "  chain eg {\n"
             "    type filter hook egress device \"eth0\" priority 0;\n"
             "    udp dport %d-%d numgen random mod 100 < 2 drop\n"
             "    udp dport %d-%d numgen random mod 100 < 1 dup to \"eth0\"\n"
             "  }\n"
             "  chain ing {\n"
             "    type filter hook ingress device \"eth0\" priority 0;\n"
             "    udp sport %d-%d numgen random mod 100 < 2 drop\n"
             "  }\n"
             "}\n") % (lo, hi, lo, hi, lo, hi)
    for i in range(net.workers):
        ns = net.ns_worker(i)
        if on:
            r = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True,
                               capture_output=True)
            if r.returncode != 0:
                raise Failed("this kernel lacks nftables netdev egress/numgen/dup: " + r.stderr.strip())
        else:
            phubnet.sh("ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", "phubloss", check=False)


def lossy_case(net):
    nft_lossy(net, True)
    try:
        args = ["--rounds", "12", "--reorder-ppm", "10000", "--dup-ppm", "5000", "--timeout-ms", "30000"]
        res = check_demo(net.demo_workers("lossy", range(4), args), "lossy")
    finally:
        nft_lossy(net, False)
    retx = sum(int(s["retransmits"]) + int(s["fast_retransmits"]) for _, s, _ in res)
    expect(retx > 0, "lossy: no retransmits: was any loss injected?")
    return "12 rounds verified through 2%% loss, 1%% dup, 1%% reorder: %d retransmits, %s duplicates" % (
        retx, sum(int(s["duplicates"]) for _, s, _ in res))


def tenant_case(net):
    good = net.demo_workers("tenant-good", [0], ["--rounds", "5"])
    secret_file = os.path.join(net.tmp, "wrong.secret")
    with open(secret_file, "w") as f:
        f.write("wrong\n")  # a secret is read from a file (or PHUB_SECRET), never from argv where ps shows it
    bad = net.demo_workers("tenant-bad", [0], ["--rounds", "1", "--secret-file", secret_file, "--timeout-ms", "1500"])
    check_demo(good, "tenant-good")
    rc, summary, err = bad[0]
    expect(rc != 0 and summary.get("status") == "unreachable", "tenant-bad: expected unreachable, got %s" % summary)
    expect("bad_tag" in err and "secret" in err, "tenant-bad: the message lacks the auth hint: " + err)
    return "wrong secret -> '%s...'; the other job verified" % err[:90]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--only", default="", help="comma-separated case names")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("client system test: needs root (namespaces, af_packet)")
        return 1
    cases = [
        ("allreduce-sum-fp32", lambda n: demo_case(n, "ar-sum", 4, 20)),
        ("allreduce-mean-3-workers", lambda n: demo_case(n, "ar-mean3", 3, 20)),
        ("allreduce-mean-bf16", lambda n: demo_case(n, "ar-bf16", 4, 20)),
        ("allreduce-deterministic", lambda n: demo_case(n, "ar-det", 4, 10)),
        ("ps-adam-fp32", lambda n: demo_case(n, "ps-adam", 2, 50)),
        ("ps-momentum-bf16", lambda n: demo_case(n, "ps-bf16", 4, 30)),
        ("python-deterministic-bit-exact", lambda n: python_case(n, "py-det", 41000, 10, "s10", "mean", True)),
        ("python-nondeterministic-close", lambda n: python_case(n, "py-fast", 41100, 11, "", "sum", False)),
        ("python-push-pull", lambda n: python_case(n, "py-split", 41500, 15, "", "sum", False, split=True)),
        ("allreduce-sync-2-workers", lambda n: demo_case(n, "ar-sync", 2, 10, ["--sync"])),
        ("errors-from-the-server", error_case),
        ("loss-dup-reorder", lossy_case),
        ("tenants-wrong-secret", tenant_case),
    ]
    only = set(filter(None, a.only.split(",")))
    passed = failed = 0
    start = time.time()
    with phubnet.Net(4, build_dir=a.build) as net:
        net.start_server(jobs(), timeout_s=900)
        for name, fn in cases:
            if only and name not in only:
                continue
            t0 = time.time()
            try:
                detail = fn(net)
                passed += 1
                print("PASS %-32s %5.1fs  %s" % (name, time.time() - t0, detail), flush=True)
            except Failed as e:
                failed += 1
                print("FAIL %-32s %5.1fs  %s" % (name, time.time() - t0, e), flush=True)
        counters, log = net.stop_server()
        drops = counters.get("drops", {})
        lossy = counters.get("job lossy", {})
        checks = [("server counted the wrong secret as bad_tag", drops.get("bad_tag", 0) > 0 or bool(only)),
                  ("server saw retransmits of the lossy job", lossy.get("retransmits_seen", 0) > 0 or bool(only)),
                  ("server saw duplicates of the lossy job", lossy.get("duplicates", 0) > 0 or bool(only))]
        for what, ok in checks:
            passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
            print("%s server-counters: %s" % ("PASS" if ok else "FAIL", what))
        if failed:
            print(log[-4000:])
    print("client system test: %d passed, %d failed in %.0fs" % (passed, failed, time.time() - start))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

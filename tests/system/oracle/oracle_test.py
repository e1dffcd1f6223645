#!/usr/bin/python3
"""The client-end correctness oracle: phub.torch's DDP hook and PSOptimizer over a real phub-server, through
loss, duplication and reordering, proving that what the server summed is what each rank passed in.

Bed: tests/system/client/phubnet.py (phub-server on af_packet behind a bridge, 3 workers in namespaces, one
process each, real PyTorch and a gloo group), with faults on every worker's path to the server:
  loss          nftables on each worker's eth0: 2 % of the phub skbs dropped each way (numgen random; on the
                way out a UDP GSO batch is one skb)
  duplication   nftables `dup to` on the same egress hook: 1 % of the push skbs sent twice
  reordering    the user-space delay line (tools/testbed/delayline.cpp) between the bridge and the server:
                50 us +- 40 us each way, 3 % of the frames 1.5 ms later (this kernel has no netem)
Cases (oracle_worker.py has the checks; server_math.py the server's arithmetic):
  ddp-deterministic   DDP, 3 buckets, rank-order mean: future and gradients bit-exact
  ddp-arrival-order   DDP (gradient_as_bucket_view), arrival-order sum, the hook divides: each element is
                      one of the server's possible orders bit for bit, within the fp32 summation bound
                      (in every DDP case all ranks must receive the same bits)
  ddp-bf16            DDP on a bf16 job (the hook stages fp32 <-> bf16), deterministic mean, bit-exact
  ps-momentum         PSOptimizer, momentum + L2 weight decay, mean: weights bit-exact vs the replay
  ps-adamw            PSOptimizer, Adam with decoupled weight decay, sum
  ps-nesterov-bf16    PSOptimizer, Nesterov on a bf16 job (weights narrowed to bf16)
In the DDP cases the wrapper hook overwrites every bucket with garbage as soon as phub's hook returns; in
the ps cases the gradients are overwritten as soon as step() returns. Each case prints its steps, values
checked, mismatches, the clients' retransmits and duplicates, and the fault counters (nft, delay line,
server) of that case; a case whose faults did not happen fails.
Usage: oracle_test.py --build BUILD_DIR [--build-dir DIR_FOR_THE_DELAY_LINE] [--only a,b] [--steps N]
                      [--workers 2..4]   (root; cleans up every namespace and process, also on failure)
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "testbed"))
sys.path.insert(0, HERE)
import oracle_model  # noqa: E402
import phubnet  # noqa: E402
import testbed  # noqa: E402

WORKERS = 3  # --workers: 2 to 4 (the exact patterns sum exactly for up to 4 ranks)
LCORES = 2
PORTS = (42000, 42999)  # every job's port_base lies here; the fault rules match this range
SECRET = "oracle"
DELAY = ["--delay-us", "50", "--jitter-us", "40", "--reorder", "0.03", "--reorder-extra-us", "1500", "--seed", "13"]
NFT_TABLE = "phuboracle"
WORKER_TIMEOUT_S = 100

CASES = [  # name, kind, the job's settings (the worker's too), DDP's gradient_as_bucket_view
    ("ddp-deterministic", "ddp", dict(reduce="mean", deterministic=True), False),
    ("ddp-arrival-order", "ddp", dict(reduce="sum"), True),
    ("ddp-bf16", "ddp", dict(reduce="mean", dtype="bf16", deterministic=True), False),
    ("ps-momentum", "ps", dict(mode="ps", reduce="mean",
                               optimizer=dict(kind="momentum", lr=0.05, momentum=0.9, weight_decay=0.01)), False),
    ("ps-adamw", "ps", dict(mode="ps", reduce="sum", optimizer=dict(kind="adam", lr=0.01, beta1=0.9, beta2=0.99,
                                                                   eps=1e-6, weight_decay=0.05, adamw=True)), False),
    ("ps-nesterov-bf16", "ps", dict(mode="ps", reduce="mean", dtype="bf16",
                                    optimizer=dict(kind="nesterov", lr=0.02, momentum=0.8)), False),
]


class Failed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failed(what)


def jobs(workers):
    out = []
    for i, (name, _, settings, _) in enumerate(CASES):
        out.append(phubnet.job(60 + i, name, workers, oracle_model.key_list(), PORTS[0] + 100 * (i + 1),
                               secret=SECRET, **settings))
    return out


class OracleNet(phubnet.Net):
    """phubnet's bed with a delay line on the server's link:
    server eth0 -- sv [delay line, namespace <p>-dl] dlb -- sd (bridge port)."""

    def up(self):
        super().up()
        br, dl = self.prefix + "-br", self.ns_delay()
        self._netns(dl)
        phubnet.sh("ip", "-n", br, "link", "set", "sv", "nomaster")
        phubnet.sh("ip", "-n", br, "link", "set", "sv", "netns", dl)
        phubnet.sh("ip", "-n", dl, "link", "add", "dlb", "mtu", str(self.mtu), "type", "veth", "peer", "name", "sd",
                   "mtu", str(self.mtu), "netns", br)
        phubnet.sh("ip", "-n", br, "link", "set", "sd", "master", "br0", "up")
        for dev in ("sv", "dlb"):
            phubnet.sh("ip", "-n", dl, "link", "set", dev, "up")

    def ns_delay(self):
        return self.prefix + "-dl"

    def popen_ns(self, ns, argv, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(argv), **kw)
        self.procs.append(p)  # killed by down()
        return p


# ---- faults ---------------------------------------------------------------------------------------------
def nft_rules():
    lo, hi = PORTS
    return ("table netdev %s {\n"
            "  chain eg {\n"
            "    type filter hook egress device \"eth0\" priority 0;\n"
            "    udp dport %d-%d numgen random mod 100 < 2 counter drop\n"
            "    udp dport %d-%d numgen random mod 100 < 1 counter dup to \"eth0\"\n"
            "  }\n"
            "  chain ing {\n"
            "    type filter hook ingress device \"eth0\" priority 0;\n"
            "    udp sport %d-%d numgen random mod 100 < 2 counter drop\n"
            "  }\n"
            "}\n") % (NFT_TABLE, lo, hi, lo, hi, lo, hi)


def install_faults(net):
    if shutil.which("nft") is None:
        raise Failed("nftables (nft) is missing: cannot inject loss and duplication (apt-get install nftables)")
    for i in range(net.workers):
        r = subprocess.run(["ip", "netns", "exec", net.ns_worker(i), "nft", "-f", "-"], input=nft_rules(), text=True,
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            raise Failed("this kernel lacks what the fault rules need (nftables netdev egress hook, numgen, dup): "
                         + r.stderr.strip())


def nft_counters(net):
    """{'dropped_out', 'duplicated', 'dropped_in'}: packets counted by the fault rules of every worker."""
    total = dict(dropped_out=0, duplicated=0, dropped_in=0)
    for i in range(net.workers):
        text = phubnet.sh("ip", "netns", "exec", net.ns_worker(i), "nft", "-j", "list", "table", "netdev", NFT_TABLE,
                          capture=True)
        for item in json.loads(text)["nftables"]:
            rule = item.get("rule")
            if not rule:
                continue
            packets = sum(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
            if any("dup" in e for e in rule["expr"]):
                total["duplicated"] += packets
            elif rule["chain"] == "eg":
                total["dropped_out"] += packets
            else:
                total["dropped_in"] += packets
    return total


class DelayLine:
    """The delay line process; counters() asks it (SIGUSR1) for its counters and reads them from its log."""
    LINE = re.compile(r"forwarded (\d+)/(\d+), dropped (\d+), reordered (\d+)/(\d+)")

    def __init__(self, net, exe):
        self.net = net
        self.log = os.path.join(net.tmp, "delayline.log")
        self.proc = net.popen_ns(net.ns_delay(), ["timeout", "600", exe, "--a", "sv", "--b", "dlb"] + DELAY,
                                 stderr=open(self.log, "w"))
        time.sleep(0.3)
        if self.proc.poll() is not None:
            raise Failed("the delay line did not start: " + open(self.log).read().strip())

    def pid(self):
        for pid in (phubnet.sh("ip", "netns", "pids", self.net.ns_delay(), check=False, capture=True) or "").split():
            try:
                argv0 = open("/proc/%s/cmdline" % pid).read().split("\0")[0]
                if os.path.basename(argv0) == "phub-delayline":  # not `timeout`, whose argv names it too
                    return int(pid)
            except OSError:
                pass
        raise Failed("the delay line is not running:\n" + open(self.log).read()[-1000:])

    def counters(self):
        before = len(open(self.log).read().splitlines())
        os.kill(self.pid(), signal.SIGUSR1)
        deadline = time.time() + 3
        while time.time() < deadline:
            lines = open(self.log).read().splitlines()
            if len(lines) > before:
                m = self.LINE.search(lines[-1])
                if m:
                    v = list(map(int, m.groups()))
                    return dict(to_server=v[0], to_workers=v[1], delay_dropped=v[2], reordered_to_server=v[3],
                                reordered_to_workers=v[4])
            time.sleep(0.05)
        raise Failed("the delay line did not report its counters")


def faults_now(net, delay):
    f = nft_counters(net)
    f.update(delay.counters())
    return f


# ---- cases ------------------------------------------------------------------------------------------------
def run_case(net, index, steps, port):
    _, kind, settings, bucket_view = CASES[index]
    workers = net.workers
    spec = dict(kind=kind, reduce=settings["reduce"], dtype=settings.get("dtype", "fp32"),
                deterministic=settings.get("deterministic", False), optimizer=settings.get("optimizer"),
                bucket_view=bucket_view, bucket_cap_mb=0.01, steps=steps, job=60 + index,
                port_base=PORTS[0] + 100 * (index + 1))
    env = {"PYTHONPATH": os.path.join(net.build, "lib", "client", "python"), "PHUB_SERVER": phubnet.SERVER_IP,
           "PHUB_LCORES": str(LCORES), "PHUB_SECRET": SECRET, "PHUB_TIMEOUT_MS": "30000",
           "MASTER_ADDR": phubnet.worker_ip(0), "MASTER_PORT": str(port), "WORLD_SIZE": str(workers),
           "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
    procs = []
    for rank in range(workers):
        argv = ["timeout", str(WORKER_TIMEOUT_S), "/usr/bin/python3", os.path.join(HERE, "oracle_worker.py"),
                json.dumps(spec)]
        procs.append(net.popen(rank, argv, env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE))
    results, errors = [], []
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=WORKER_TIMEOUT_S + 30)
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if not lines:
            errors.append("rank %d exited %d without a result:\n%s" % (rank, p.returncode, err[-2500:]))
            continue
        r = json.loads(lines[-1])
        results.append(r)
        if p.returncode != 0 and r["mismatches"] == 0:
            errors.append("rank %d exited %d:\n%s" % (rank, p.returncode, err[-2500:]))
    return results, errors


def describe(results, faults):
    stats = {k: sum(r["stats"][k] for r in results) for k in results[0]["stats"]}
    values = sum(r["values"] for r in results)
    mismatches = sum(r["mismatches"] for r in results)
    r0 = results[0]
    what = "%d steps x %d ranks, %d values checked, %d mismatches" % (r0["steps"], len(results), values, mismatches)
    if "buckets" in r0:
        what += "; %d buckets, %d bit-pattern steps" % (r0["buckets"], r0["pattern_steps"])
        if r0["worst_of_bound"]:
            what += ", %d elements in a non-rank order, worst error %.2f of the bound" % (
                sum(r["other_order"] for r in results), max(r["worst_of_bound"] for r in results))
    else:
        what += "; weights moved up to %.3g" % r0["weight_change"]
    what += ("\n      clients: retransmits %d (fast %d), rerequests %d, timeouts %d, duplicate results %d, "
             "needless resends %d" % (stats["retransmits"], stats["fast_retransmits"], stats["rerequests"],
                                      stats["timeouts"], stats["duplicates"], stats["needless_resends"]))
    what += ("\n      faults: nft dropped %d out / %d in, duplicated %d (out: skbs, a GSO batch is one; GSO on %d of "
             "%d ranks, %d datagrams sent); delay line reordered %d/%d of %d/%d frames (to server / to workers)" % (
                 faults["dropped_out"], faults["dropped_in"], faults["duplicated"], stats["gso"], len(results),
                 stats["packets_sent"], faults["reordered_to_server"], faults["reordered_to_workers"],
                 faults["to_server"], faults["to_workers"]))
    return what, mismatches, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--build-dir", default=None, help="where to compile the delay line (default: --build)")
    ap.add_argument("--only", default="")
    ap.add_argument("--steps", type=int, default=0, help="steps per case (default: 60 ddp, 40 ps)")
    ap.add_argument("--workers", type=int, default=WORKERS, choices=(2, 3, 4))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("client oracle: needs root (namespaces, af_packet, nftables)")
        print("SUBTESTS passed=0 failed=1")
        return 1
    only = set(filter(None, a.only.split(",")))
    passed = failed = 0
    start = time.time()
    jobs_by_name = {}
    delay_exe = testbed.build_delayline(a.build_dir or a.build)
    with OracleNet(a.workers, build_dir=a.build, lcores=LCORES) as net:
        try:
            delay = DelayLine(net, delay_exe)
            install_faults(net)
            net.start_server(jobs(a.workers), timeout_s=600)
        except (Failed, RuntimeError) as e:
            print("FAIL setup: %s" % e)
            print("SUBTESTS passed=0 failed=1")
            return 1
        for index, (name, kind, _, _) in enumerate(CASES):
            if only and name not in only:
                continue
            steps = a.steps or (60 if kind == "ddp" else 40)
            t0 = time.time()
            try:
                before = faults_now(net, delay)
                results, errors = run_case(net, index, steps, 29700 + index)
                after = faults_now(net, delay)
                faults = {k: after[k] - before[k] for k in after}
                expect(not errors, "%s" % "\n".join(errors))
                expect(len(results) == a.workers, "%d of %d ranks reported" % (len(results), a.workers))
                detail, mismatches, stats = describe(results, faults)
                first = [m for r in results for m in r["first"]][:6]
                kinds = ", ".join("rank %d: %s" % (r["rank"], r["by_kind"]) for r in results if r["by_kind"])
                expect(mismatches == 0, detail + "\n      mismatches by check: " + kinds +
                       "\n      first mismatches: " + "; ".join(first))
                expect(all(r["steps"] == steps for r in results), "a rank ran fewer steps: " + detail)
                expect(faults["dropped_out"] > 0 and faults["dropped_in"] > 0, "no packet was dropped: " + detail)
                expect(faults["duplicated"] > 0, "no packet was duplicated: " + detail)
                expect(faults["reordered_to_server"] > 0 and faults["reordered_to_workers"] > 0,
                       "the delay line reordered nothing: " + detail)
                expect(stats["retransmits"] + stats["fast_retransmits"] > 0, "no client retransmitted: " + detail)
                jobs_by_name[name] = True
                passed += 1
                print("PASS %-20s %5.1fs  %s" % (name, time.time() - t0, detail), flush=True)
            except (Failed, subprocess.TimeoutExpired) as e:
                jobs_by_name[name] = False
                failed += 1
                print("FAIL %-20s %5.1fs  %s" % (name, time.time() - t0, e), flush=True)
        counters, log = net.stop_server()
        for name in jobs_by_name:
            c = counters.get("job " + name, {})
            ok = c.get("duplicates", 0) > 0
            passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
            print("%s server %-20s duplicates %d, retransmits seen %d" % (
                "PASS" if ok else "FAIL", name, c.get("duplicates", 0), c.get("retransmits_seen", 0)), flush=True)
        if failed:
            print(log[-3000:])
    print("client oracle: %d passed, %d failed in %.0fs" % (passed, failed, time.time() - start))
    print("SUBTESTS passed=%d failed=%d" % (passed, failed))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

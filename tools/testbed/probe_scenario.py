#!/usr/bin/python3
"""The phub-probe scenario on emulated racks: probe shuffled hosts, score the groups, time gloo allreduce.

1. Builds the namespace racks (testbed.py); ground truth stays here, the probe only sees addresses.
2. Starts `phub-probe agent` in every host, runs `phub-probe run` from one host with the hosts listed in a
   shuffled order, and times it.
3. Scores the recovered groups against the real racks (adjusted Rand index) and checks the outputs.
4. Runs gloo allreduce (torch.distributed, one process per host, launched with the RANK=... lines of the
   emitted rankmap.env) in the shuffled order, the planned order and the true rack-grouped order.
Prints a summary and writes everything to --json. Exit status 0 even when targets are missed (the callers
judge); non-zero when something did not run.
"""
import argparse
import json
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402

AGENT_PORT = 7700


def adjusted_rand_index(a, b):
    """ARI of two labelings (lists of equal length)."""
    def c2(x):
        return x * (x - 1) / 2
    pairs, rows, cols = {}, {}, {}
    for x, y in zip(a, b):
        pairs[(x, y)] = pairs.get((x, y), 0) + 1
        rows[x] = rows.get(x, 0) + 1
        cols[y] = cols.get(y, 0) + 1
    index = sum(c2(v) for v in pairs.values())
    sr, sc, total = sum(c2(v) for v in rows.values()), sum(c2(v) for v in cols.values()), c2(len(a))
    expected = sr * sc / total if total else 0.0
    top = (sr + sc) / 2
    return 1.0 if top == expected else (index - expected) / (top - expected)


def interleaved_shuffle(hosts, seed):
    """A seeded random order in which no two ring neighbours share a rack: what round-robin placement
    across racks hands a job (every ring edge crosses an uplink)."""
    rng = random.Random(seed)
    order = list(hosts)
    for _ in range(100000):
        rng.shuffle(order)
        if all(order[i]["rack"] != order[(i + 1) % len(order)]["rack"] for i in range(len(order))):
            return order
    raise RuntimeError("no interleaved order found")


def uplink_load(order):
    """Largest number of ring transfers that leave or enter one rack at once."""
    out, inn = {}, {}
    for i, h in enumerate(order):
        nxt = order[(i + 1) % len(order)]
        if h["rack"] != nxt["rack"]:
            out[h["rack"]] = out.get(h["rack"], 0) + 1
            inn[nxt["rack"]] = inn.get(nxt["rack"], 0) + 1
    return max(list(out.values()) + list(inn.values()) + [0])


def parse_env_lines(path):
    """rankmap.env: '<name> KEY=VALUE ...' per host -> {name: {KEY: VALUE}}."""
    env = {}
    with open(path) as f:
        for line in f:
            words = line.split()
            if words:
                env[words[0]] = dict(w.split("=", 1) for w in words[1:])
    return env


def run_probe(tb, args, order, work, extra_args=()):
    """Agents in every host, `phub-probe run` (plus extra_args) from order[0]'s host: (output dir, wall s)."""
    hosts_file = os.path.join(work, "hosts.txt")
    with open(hosts_file, "w") as f:
        f.write("# shuffled; addresses only\n")
        for h in order:
            f.write("%s:%d\n" % (h["addr"], AGENT_PORT))
    env = dict(os.environ, PHUB_PROBE_TOKEN=secrets.token_hex(16))  # the agents' control token, this run's own
    agents = [tb.popen(h["ns"], [args.probe, "agent", "--listen", "%s:%d" % (h["addr"], AGENT_PORT)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env) for h in tb.hosts]
    time.sleep(0.5)
    out_dir = os.path.join(work, "plan")
    cmd = tb.exec_argv(order[0]["ns"], [args.probe, "run", "--hosts", hosts_file, "--out", out_dir,
                                        "--samples", str(args.samples)] + (["--bandwidth"] if args.bandwidth else [])
                                       + list(extra_args))
    t0 = time.time()
    r = subprocess.run(cmd, timeout=120, text=True, capture_output=True, env=env)
    wall = time.time() - t0
    for a in agents:
        a.terminate()
    for a in agents:
        a.wait(timeout=10)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise RuntimeError("phub-probe run failed (%d)" % r.returncode)
    return out_dir, wall


def hub_config_template(launcher, tb, job):
    """A --hub-config-template for phub-probe (docs/probe.md, "Outputs"): phubnet's server config for `job` (or a
    list of jobs; launcher: a phubnet.Net), made a complete hub config in which @RACK@ picks the rack. `job` gives
    ranks_by_rack = "@RANKS_BY_RACK@", which becomes the plan's. The probe chooses a worker host per rack as its
    hub; here the testbed's hub host 1 of the rack whose subnet the planned rack's hosts are on runs it instead
    (hub_of_host, from the testbed's ground truth). The hub's port is given as /15, the subnet of every rack,
    so that the peer hubs are on a port's subnet (phub-server has no gateway setting); the rack routers answer
    its ARP for them (proxy ARP, testbed.py). EAL file prefix <tb.prefix>-hub<rack>, control socket
    <launcher.tmp>/ctl-<rack>.sock."""
    text = launcher.config_text(job if isinstance(job, list) else [job],
                                server_ip="@HUB@", file_prefix=tb.prefix + "-hub@R@",
                                socket_path=os.path.join(launcher.tmp, "ctl-@R@.sock"))
    text = (text.replace('"@HUB@/24"', 'hub_ipv4[@RACK@] .. "/15"')
                .replace('"@RANKS_BY_RACK@"', "plan.ranks_by_rack")
                .replace("@R@", '" .. @RACK@ .. "')
                .replace("return { ", "return { racks = racks, rack = @RACK@, ", 1))
    hubs = ", ".join('["%s"] = "%s"' % (h["addr"], testbed.hub_addr(h["rack"])) for h in tb.hosts)
    return ("-- a hub config template for phub-probe (tools/testbed/probe_scenario.py)\n"
            "local plan = include(\"racks.lua\")\n"
            "local hub_of_host = { %s }\n"
            "local racks, hub_ipv4 = {}, {}\n"
            "for i, r in ipairs(plan.racks) do\n"
            "  racks[i] = { name = r.name, hub_ipv4 = hub_of_host[plan.hosts_by_rack[r.name][1]] }\n"
            "  hub_ipv4[r.name] = racks[i].hub_ipv4\n"
            "end\n" % hubs) + text


def planned_racks(out_dir):
    """racks.lua as phub-probe wrote it, read back: [(rack name, [host, ...], [rank, ...])] in the file's
    (the plan's) rack order, each rack's hosts (hosts_by_rack) in the order of its ranks (ranks_by_rack).
    Raises if a rack has no ranks_by_rack or hosts_by_rack entry."""
    with open(os.path.join(out_dir, "racks.lua")) as f:
        text = f.read()
    body = text.split("\nreturn {", 1)[1]  # past the header comment, which names the tables too
    racks_text, rest = body.split("\n  ranks_by_rack = {", 1)
    ranks_text, hosts_text = rest.split("\n  hosts_by_rack = {", 1)
    names = re.findall(r'\{ name = "([^"]+)"', racks_text)
    ranks = dict(re.findall(r'(\w+) = \{ ([0-9, ]*) \}', ranks_text))
    hosts = dict(re.findall(r'(\w+) = \{ ([^}]*) \}', hosts_text))
    return [(name, re.findall(r'"([^"]+)"', hosts[name]), [int(x) for x in ranks[name].split(",")]) for name in names]


def check_outputs(out_dir, order):
    problems = []
    for name in ("report.json", "hostfile", "rankmap.txt", "rankmap.env", "racks.lua", "heatmap.png", "matrix.txt"):
        if not os.path.getsize(os.path.join(out_dir, name)):
            problems.append(name + " is empty")
    with open(os.path.join(out_dir, "heatmap.png"), "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            problems.append("heatmap.png is not a PNG")
    with open(os.path.join(out_dir, "hostfile")) as f:
        addrs = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
    if sorted(addrs) != sorted(h["addr"] for h in order):
        problems.append("hostfile does not list every host once")
    return problems, addrs


def run_allreduce(tb, args, orders, env, work):
    orders_file = os.path.join(work, "orders.json")
    with open(orders_file, "w") as f:
        json.dump(orders, f)
    result = os.path.join(work, "allreduce.json")
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gloo_allreduce.py")
    procs = []
    for h in tb.hosts:
        e = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="eth0", **env[h["addr"]])
        procs.append(tb.popen(h["ns"], ["/usr/bin/python3", worker, "--orders", orders_file, "--self", h["addr"],
                                        "--elems", str(args.elems), "--iters", str(args.iters), "--reps",
                                        str(args.reps), "--out", result], env=e,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    deadline = time.time() + args.allreduce_timeout
    failed = []
    for p in procs:
        try:
            p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p.returncode != 0:
            failed.append((p.returncode, (p.stderr.read() or "")[-600:]))
    if failed:
        raise RuntimeError("allreduce workers failed: %s" % failed[:2])
    with open(result) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True, help="phub-probe binary")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--racks", type=int, default=3)
    ap.add_argument("--hosts-per-rack", type=int, default=4)
    ap.add_argument("--access-mbit", type=float, default=50.0)
    ap.add_argument("--oversubscription", type=float, default=4.0)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--bandwidth", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--elems", type=int, default=1 << 19, help="fp32 elements per allreduce")
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--allreduce-timeout", type=float, default=150)
    ap.add_argument("--skip-allreduce", action="store_true")
    args = ap.parse_args()

    res = {"phase_s": {}}
    t_start = time.time()
    with testbed.Testbed(args.racks, args.hosts_per_rack, args.access_mbit, args.oversubscription) as tb, \
            tempfile.TemporaryDirectory(prefix="phub-probe-scenario-") as work:
        res["phase_s"]["testbed_up"] = time.time() - t_start
        truth = {h["addr"]: h["rack"] for h in tb.hosts}
        shuffled = interleaved_shuffle(tb.hosts, args.seed)
        res["topology"] = tb.ground_truth()
        out_dir, wall = run_probe(tb, args, shuffled, work)
        with open(os.path.join(out_dir, "report.json")) as f:
            report = json.load(f)
        got = {h["addr"]: h["group"] for h in report["hosts"]}
        addrs = sorted(truth)
        res["ari"] = adjusted_rand_index([truth[a] for a in addrs], [got[a] for a in addrs])
        res["groups"] = report["groups"]
        res["probe_wall_s"] = wall
        res["probe_report_wall_s"] = report.get("probe", {}).get("wall_s")
        problems, hostfile = check_outputs(out_dir, shuffled)
        res["output_problems"] = problems
        with open(os.path.join(out_dir, "racks.lua")) as f:
            res["racks_lua"] = f.read()
        env = parse_env_lines(os.path.join(out_dir, "rankmap.env"))  # host names are their addresses here
        planned = sorted(env, key=lambda a: int(env[a]["RANK"]))
        res["planned_matches_hostfile"] = planned == hostfile
        grouped = [h["addr"] for h in sorted(tb.hosts, key=lambda h: (h["rack"], h["addr"]))]
        orders = {"shuffled": [h["addr"] for h in shuffled], "planned": planned, "grouped": grouped}
        by_addr = {h["addr"]: h for h in tb.hosts}
        res["orders"] = orders
        res["uplink_load"] = {k: uplink_load([by_addr[a] for a in v]) for k, v in orders.items()}
        print("ARI of recovered groups vs racks: %.3f (%d groups)" % (res["ari"], res["groups"]))
        print("probe wall time (run + plan): %.2f s" % wall)
        print("uplink load (transfers per uplink): %s" % res["uplink_load"])
        if problems:
            print("output problems: %s" % problems)
        if not args.skip_allreduce:
            t_ar = time.time()
            ar = run_allreduce(tb, args, orders, env, work)
            res["phase_s"]["allreduce"] = time.time() - t_ar
            res["phase_s"]["allreduce_setup_rank0"] = ar["setup_s"]
            med = {k: statistics.median(v) for k, v in ar["seconds_per_allreduce"].items()}
            res["allreduce"] = {"elems": args.elems, "bytes": args.elems * 4, "median_s": med,
                                "samples_s": ar["seconds_per_allreduce"]}
            # Link-rate bound of a ring allreduce: each rank sends 2(N-1)/N of the tensor, each transfer at
            # the access rate or its share of a rack uplink, whichever is smaller.
            n, size = len(tb.hosts), args.elems * 4
            bound = {k: 2 * (n - 1) / n * size * 8 / 1e6 / min(tb.access_mbit, tb.uplink_mbit / res["uplink_load"][k])
                     for k in orders}
            res["allreduce"]["link_bound_s"] = bound
            res["planned_speedup"] = med["shuffled"] / med["planned"]
            res["grouped_speedup"] = med["shuffled"] / med["grouped"]
            print("gloo allreduce of %d MiB over %d ranks (median s): shuffled %.3f, planned %.3f, rack-grouped %.3f"
                  % (args.elems * 4 >> 20, len(tb.hosts), med["shuffled"], med["planned"], med["grouped"]))
            print("link-rate bounds (s): %s; measured/bound: %s" % (
                {k: round(v, 3) for k, v in bound.items()}, {k: round(med[k] / bound[k], 2) for k in bound}))
            print("speedup planned/shuffled %.2fx, rack-grouped/shuffled %.2fx, planned vs rack-grouped %.3f"
                  % (res["planned_speedup"], res["grouped_speedup"], res["planned_speedup"] / res["grouped_speedup"]))
    res["phase_s"]["total"] = time.time() - t_start
    print("phases (s): %s" % {k: round(v, 1) for k, v in res["phase_s"].items()})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The launchers of issue 30 and docs/training.md's walkthrough for several hosts: probe, plan, boot the hubs,
train with one training script, unchanged, under OpenMPI's mpirun with the hostfile phub-probe wrote, and
under the probe's rankmap.env (torchrun's variables), in network namespaces.

On the emulated datacenter of tools/testbed (2 racks x 2 worker hosts, one hub host per rack, 198.18.0.0/15):
1. Probe and plan: `phub-probe agent` on the 4 hosts, `phub-probe run` from one of them, the hosts listed in an
   interleaved shuffled order, with a hub config template (tools/testbed/probe_scenario.py: run_probe,
   hub_config_template; the job is a deterministic mean over the model's keys). Outputs used: hostfile,
   rankmap.env, racks.lua, hub-<rack>.lua.
2. Boot the hubs: one phub-server per planned rack, from the probe's hub-<rack>.lua unchanged, on the hub
   host of the testbed rack that holds the planned rack's hosts.
3. mpirun, from the first host of the hostfile: `mpirun --hostfile <the probe's hostfile>` with one app
   context per run of consecutive ranks of one rack (-np, -x PHUB_SERVER=<that rack's hub>), the settings
   every rank shares repeated in each context (-x is per context), running launch_train.py: DDP on gloo with
   the phub hook, phub.launch.init_process_group and Client.from_env. OpenMPI starts its daemons on the other
   hosts through the rsh agent tests/system/client/mpi_agent.sh (PHUB_NET_LAYOUT=testbed: `ip netns exec`
   into the namespace of the address the hostfile names). mpirun runs under `env -i` and the agent passes on
   only mpirun's environment, so, as over ssh, a rank sees only what -x exports: no RANK, WORLD_SIZE or
   MASTER_PORT; the job's secret goes by name (-x PHUB_SECRET), its value in mpirun's environment.
4. The same script, one process per host, each with its host's line of rankmap.env and its rack's hub.
5. tests/system/client/py_worker.py (phub.Client.from_env and numpy, no torch) under the same mpirun line: the
   client reads OMPI_COMM_WORLD_RANK/SIZE itself.
Checks (each can fail): the probe's groups are the testbed's racks; the hostfile lists every host once and
rankmap.env gives rank r to line r's host; both hubs start from the probe's configs; every run exits 0 within
its limit; every rank reports the launcher that decided (OpenMPI, then torchrun), ranks 0..W-1 once each, and a
phub rank equal to its torch.distributed rank; mpirun put rank r on the hostfile's line r and started no rank
with RANK, WORLD_SIZE, LOCAL_RANK or MASTER_PORT in its environment (/proc/<pid>/environ of the python
processes while they run); every rank's final weights of both trainings equal, bit for bit, a single-process
replay (each rank's gradient in turn, each rack's ranks summed in rank order, then the racks in order, times
fp32(1/W): the hubs' deterministic mean, docs/hierarchy.md) and differ from the initial weights; py_worker's
results are right on every rank; the hubs forwarded partials and results both ways and stop with exit 0;
nothing is left behind.
Usage: launchers_test.py --build BUILD_DIR   (root; every process has a timeout)
"""
import json
import os
import re
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CLIENT = os.path.join(ROOT, "tests", "system", "client")
sys.path.insert(0, os.path.join(ROOT, "tests", "system", "hier"))
sys.path.insert(0, HERE)
import hierbed  # noqa: E402
from hierbed import livenet, testbed  # noqa: E402
import probe_scenario  # noqa: E402  (hierbed put tools/testbed on the path)
import train_model  # noqa: E402
from livenet import phubnet  # noqa: E402

WORLD = 4
STEPS = 30
JOB = (73, 44300)  # (job id, port base)
SECRET = "launchers-system-test-secret"
RUN_LIMIT_S = 150  # one launch: 4 torch imports and gloo on 2 loaded CPUs take 20-60 s
HUB_LIMIT_S = 900
LINE = re.compile(r"^launch_train: rank (\d+) of (\d+) \(([^:]+): [^)]*\).* phub rank (\d+) of (\d+); "
                  r"loss ([0-9.]+) -> ([0-9.]+)$", re.M)


def job(**extra):
    """The training job: the model's keys, a deterministic mean across the racks."""
    return phubnet.job(JOB[0], "launch-train", WORLD, train_model.key_list(), JOB[1], reduce="mean",
                       deterministic=True, secret=SECRET, allowed_sources=["198.18.0.0/15"], **extra)


def hostfile_hosts(path):
    """The hosts of an OpenMPI hostfile in line order (comments and blank lines skipped)."""
    with open(path) as f:
        return [line.split()[0] for line in f if line.strip() and not line.lstrip().startswith("#")]


def rank_runs(plan, hub_of_rack):
    """[(ranks, hub address)]: the runs of consecutive ranks of one rack, in rank order (one mpirun app context
    each). plan: probe_scenario.planned_racks."""
    rack_of = {rank: name for name, _, ranks in plan for rank in ranks}
    runs = []
    for rank in sorted(rack_of):
        if runs and rack_of[rank] == rack_of[runs[-1][0][-1]]:
            runs[-1][0].append(rank)
        else:
            runs.append(([rank], hub_of_rack[rack_of[rank]]))
    return runs


def mpirun_argv(tb, hostfile, runs, shared, program):
    """mpirun (to run in a host's namespace) from an empty environment but PHUB_SECRET (exported by name), with
    the hostfile; one app context per run of ranks, each with -x PHUB_SERVER=<its hub> and -x NAME=value of
    `shared`."""
    argv = [
        "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "PHUB_SECRET=" + SECRET,
        "PHUB_NET_PREFIX=" + tb.prefix, "PHUB_NET_LAYOUT=testbed",  # for the rsh agent: address -> namespace
        "timeout", str(RUN_LIMIT_S), "mpirun", "--allow-run-as-root", "--hostfile", hostfile, "--bind-to", "none",
        "--mca", "plm_rsh_agent", os.path.join(CLIENT, "mpi_agent.sh"), "--mca", "plm_rsh_no_tree_spawn", "1",
        "--mca", "oob_tcp_if_include", "eth0"]
    for i, (ranks, hub) in enumerate(runs):
        argv += ([":"] if i else []) + ["-np", str(len(ranks)), "-x", "PHUB_SERVER=" + hub, "-x", "PHUB_SECRET"]
        for name, value in shared.items():
            argv += ["-x", "%s=%s" % (name, value)]
        argv += list(program)
    return argv


def placement(tb, marker, variable, proc, limit_s, unwanted=()):
    """({rank: host address}, {rank: names of `unwanted` set}): polls the hosts' namespaces for processes whose
    command line holds `marker`, and reads `variable` from the environment they started with
    (/proc/<pid>/environ, which a later os.environ change does not touch), until every rank is seen or `proc`
    ends."""
    seen, extra, deadline = {}, {}, time.time() + limit_s
    while len(seen) < WORLD and proc.poll() is None and time.time() < deadline:
        for h in tb.hosts:
            for pid in (testbed.sh("ip", "netns", "pids", h["ns"], check=False, capture=True) or "").split():
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        if marker.encode() not in f.read():
                            continue
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
                except OSError:
                    continue  # ended meanwhile
                if variable.encode() in env:
                    rank = int(env[variable.encode()])
                    seen[rank] = h["addr"]
                    extra[rank] = sorted(n for n in unwanted if n.encode() in env)
        time.sleep(0.2)
    return seen, extra


def finish(proc, limit_s):
    """(exit status, output) of a launch, killed at its limit (its `timeout` ends it first)."""
    try:
        out, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return proc.returncode, out


def reference_weights(steps, world, racks):
    """A single process replays the job: at each step every rank's gradient on its batch, each rack's ranks
    (racks: lists of ranks, in the racks' order) summed in rank order, then the racks' sums in order, times
    fp32(1/W), then torch's SGD. Returns (initial, final) flat weights."""
    import torch
    torch.set_num_threads(1)
    x, y = train_model.dataset()
    model = train_model.make_model()
    params = list(model.parameters())
    initial = torch.cat([p.detach().reshape(-1) for p in params]).clone()
    opt = torch.optim.SGD(params, lr=train_model.LR, momentum=train_model.MOMENTUM)
    scale = torch.tensor(1.0 / world, dtype=torch.float32)
    for step in range(steps):
        grads = []
        for rank in range(world):
            opt.zero_grad()
            xb, yb = train_model.batch(x, y, step, rank, world)
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in params]))
        total = None
        for ranks in racks:
            partial = grads[ranks[0]].clone()
            for r in ranks[1:]:
                partial += grads[r]
            total = partial if total is None else total.add_(partial)
        total.mul_(scale)
        at = 0
        for p in params:
            p.grad.copy_(total[at:at + p.numel()].view_as(p))
            at += p.numel()
        opt.step()
    return initial, torch.cat([p.detach().reshape(-1) for p in params])


def check_training(check, name, rc, out, launcher, weights_dir, reference):
    """The checks of one training launch: exit status, every rank's report line, its weights."""
    import torch
    if not check("%s: exits 0 within %d s" % (name, RUN_LIMIT_S), rc == 0, "exit %s:\n%s" % (rc, out[-3000:])):
        return
    lines = LINE.findall(out)
    check("%s: ranks 0..%d once each, of world %d, found by %s; phub rank = torch.distributed rank"
          % (name, WORLD - 1, WORLD, launcher),
          sorted(int(l[0]) for l in lines) == list(range(WORLD)) and
          all(int(w) == WORLD and found == launcher and pr == r and int(pw) == WORLD
              for r, w, found, pr, pw, _, _ in lines), out[-2000:])
    initial, final = reference
    same, detail = True, []
    for r in range(WORLD):
        path = os.path.join(weights_dir, "weights-rank%d.pt" % r)
        got = torch.load(path) if os.path.exists(path) else None
        same = same and got is not None and torch.equal(got, final)
        detail.append("rank %d: %s" % (r, "missing" if got is None else "max |diff| %.3g" % float(
            (got - final).abs().max())))
    check("%s: every rank's weights after %d steps equal the single-process replay, bit for bit" % (name, STEPS),
          same, "; ".join(detail))
    check("%s: which moved from the initial weights (largest change %.3g)" % (
        name, float((final - initial).abs().max())), not torch.equal(initial, final))
    for r, _, _, _, _, first, last in sorted(lines):
        print("%s rank %s: loss %s -> %s" % (name, r, first, last), flush=True)


def main():
    build, check, ready = hierbed.begin()
    if not ready:
        return check.summary()
    started = time.time()
    probe = types.SimpleNamespace(probe=os.path.join(build, "app", "phub-probe", "phub-probe"), samples=16,
                                  bandwidth=False)
    tb = testbed.Testbed(racks=2, hosts_per_rack=2, hubs_per_rack=1, host_offloads=False,
                         prefix="%sl%d" % (testbed.FAMILY, os.getpid()))
    with tb:
        net = phubnet.Net(WORLD, build_dir=build, lcores=1, prefix=tb.prefix)  # configs, hub start, tmp dir only
        logs, servers = {}, {}
        try:
            work = net.tmp
            # 1. Probe and plan.
            template = livenet.write(os.path.join(work, "hub-template.lua"), probe_scenario.hub_config_template(
                net, tb, job(ranks_by_rack="@RANKS_BY_RACK@")))
            shuffled = probe_scenario.interleaved_shuffle(tb.hosts, 3)
            plan_dir, wall = probe_scenario.run_probe(tb, probe, shuffled, work, ["--hub-config-template", template])
            truth = {h["addr"]: h["rack"] for h in tb.hosts}
            plan = probe_scenario.planned_racks(plan_dir)
            rack_of_plan = {name: {truth[a] for a in hosts} for name, hosts, _ in plan}
            hostfile = os.path.join(plan_dir, "hostfile")
            order = hostfile_hosts(hostfile)
            rankmap = probe_scenario.parse_env_lines(os.path.join(plan_dir, "rankmap.env"))
            print("probe: %.1f s; hostfile (rank order): %s; racks %s" % (wall, " ".join(order), plan), flush=True)
            if not (check("the probe's racks are the testbed's racks, one hub config each",
                          sorted(map(tuple, rack_of_plan.values())) == [(1,), (2,)] and
                          all(os.path.exists(os.path.join(plan_dir, "hub-%s.lua" % n)) for n in rack_of_plan),
                          str(rack_of_plan)) and
                    check("the hostfile lists every host once, and rankmap.env gives rank r to line r's host",
                          sorted(order) == sorted(truth) and
                          all(rankmap[a]["RANK"] == str(r) and rankmap[a]["WORLD_SIZE"] == str(WORLD)
                              for r, a in enumerate(order)), "%s\n%s" % (order, rankmap))):
                return check.summary()
            # 2. Boot the hubs from the probe's configs.
            hub_of_rack = {}
            for name, _, _ in plan:
                (r,) = rack_of_plan[name]
                hub = tb.release_hub_address(r)
                hub_of_rack[name] = hub["addr"]
                logs[name] = os.path.join(work, "hub-%s.log" % name)
                servers[name] = (hub["ns"], net.launch_server(hub["ns"], os.path.join(plan_dir, "hub-%s.lua" % name),
                                                              logs[name], timeout_s=HUB_LIMIT_S))
            check("both hubs start from the probe's hub-<rack>.lua", len(servers) == 2)
            reference = reference_weights(STEPS, WORLD, [ranks for _, _, ranks in plan])
            runs = rank_runs(plan, hub_of_rack)
            hub_of_rank = {rank: hub for ranks, hub in runs for rank in ranks}
            first = next(h for h in tb.hosts if h["addr"] == order[0])
            script = os.path.join(HERE, "launch_train.py")
            shared = {"PYTHONPATH": os.path.abspath(os.path.join(build, "lib", "client", "python")), "PHUB_PORT_BASE": str(JOB[1]),
                      "PHUB_JOB": str(JOB[0]), "PHUB_LCORES": "1", "PHUB_TIMEOUT_MS": "30000",
                      "MASTER_ADDR": order[0], "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}

            # 3. mpirun with the probe's hostfile.
            out_mpi = os.path.join(work, "mpirun")
            os.makedirs(out_mpi)
            argv = mpirun_argv(tb, hostfile, runs, shared,
                               ["/usr/bin/python3", script, "--steps", str(STEPS), "--out", out_mpi])
            print("mpirun: %s" % " ".join(argv[argv.index("mpirun"):]), flush=True)
            proc = tb.popen(first["ns"], argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            seen, extra = placement(tb, "launch_train.py", "OMPI_COMM_WORLD_RANK", proc, RUN_LIMIT_S,
                                    unwanted=("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"))
            rc, out = finish(proc, RUN_LIMIT_S + 20)
            check("mpirun put rank r on the hostfile's line r", seen == dict(enumerate(order)),
                  "ranks seen on hosts: %s, hostfile %s" % (seen, order))
            check("and started no rank with RANK, WORLD_SIZE, LOCAL_RANK or MASTER_PORT in its environment",
                  len(extra) == WORLD and not any(extra.values()), str(extra))
            check_training(check, "mpirun", rc, out, "OpenMPI", out_mpi, reference)

            # 4. The same script, one process per host with its rankmap.env line and its rack's hub.
            out_env = os.path.join(work, "rankmap")
            os.makedirs(out_env)
            procs = []
            for h in tb.hosts:
                env = dict(os.environ)
                env.update(shared)
                env.update(rankmap[h["addr"]])  # RANK, WORLD_SIZE, LOCAL_RANK, ..., MASTER_ADDR, MASTER_PORT
                env.update(PHUB_SECRET=SECRET, PHUB_SERVER=hub_of_rank[int(env["RANK"])])
                procs.append(tb.popen(h["ns"], ["timeout", str(RUN_LIMIT_S), "/usr/bin/python3", script, "--steps",
                                                str(STEPS), "--out", out_env],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            results = [finish(p, RUN_LIMIT_S + 20) for p in procs]
            check_training(check, "rankmap.env", next((r for r, _ in results if r != 0), 0),
                           "".join(o for _, o in results), "torchrun", out_env, reference)

            # 5. phub.Client.from_env without torch: py_worker.py under the same mpirun line.
            keys = ",".join(str(n) for _, n in train_model.key_list())
            argv = mpirun_argv(tb, hostfile, runs, shared,
                               ["/usr/bin/python3", os.path.join(CLIENT, "py_worker.py"), keys, "10", "close"])
            rc, out = finish(tb.popen(first["ns"], argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True), RUN_LIMIT_S + 20)
            reports = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            check("py_worker.py under mpirun: exits 0, ranks 0..%d from OMPI_COMM_WORLD_*, 10 rounds right on each"
                  % (WORLD - 1), rc == 0 and sorted(r["rank"] for r in reports) == list(range(WORLD)) and
                  all(r["ok"] and r["rounds"] == 10 for r in reports), out[-3000:])

            rcs, counters = hierbed.stop_servers(net, servers, logs)
            jobs = {name: c.get("job launch-train", {}) for name, c in counters.items()}
            check("both hubs stop on SIGINT with exit 0", all(rc == 0 for rc in rcs.values()), str(rcs))
            check("the hubs forwarded partials and results both ways", hierbed.forwarded_both_ways(jobs), str(jobs))
        finally:
            hierbed.tear_down(check, net, logs, ["%s-hub%s" % (tb.prefix, name) for name in servers])
    leaks = tb.leaks()
    check("nothing left (namespaces, processes, root nftables tables): %s" % leaks, not any(leaks.values()))
    print("launchers test: %.0f s" % (time.time() - started), flush=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

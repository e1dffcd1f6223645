#!/usr/bin/python3
"""End-to-end system test of issue 15's loop (docs/hierarchy.md, docs/probe.md): the probe boots the hubs.

On the emulated datacenter of tools/testbed (2 racks x 2 worker hosts, 2 hub hosts per rack):
1. phub-probe agents on the 4 hosts, `phub-probe run` from one of them with the hosts listed in a shuffled
   order and a hub config template (tools/testbed/probe_scenario.py: hub_config_template, run_probe). The
   template is the only hand-written input: the probe writes racks.lua, rankmap.env and hub-<rack>.lua.
2. One phub-server per planned rack on hub 1 of the testbed rack that holds the planned rack's hosts, each
   started from its hub-<rack>.lua as the probe wrote it; one flat phub-server (the same job, not
   hierarchical) on hub 2 of rack 1.
3. Training (tests/system/training: the MLP of train_model.py, DDP with phub.torch.ddp_comm_hook on a
   deterministic mean job), every rank started with the probe's rankmap.env line (RANK, WORLD_SIZE,
   MASTER_ADDR), twice: every worker pointed at its own rack's hub, as at a flat server; then every worker
   pointed at the flat server. Each run also trains with a gloo reference hook in the order phub documents
   (docs/hierarchy.md, "Summation order").

Checks (each can fail): the probe's groups are the testbed's racks (adjusted Rand index 1.0) and each
planned rack lies in one testbed rack; the probe wrote one hub config per rack and both hubs and the flat
server start from them; both trainings complete; the hierarchical run's final parameters and every loss are
bit-equal to the gloo reference that sums each rack's ranks in rank order, then the racks in order; the flat
run's are bit-equal to the gloo reference in rank order; the hierarchical and the flat final parameters
differ by at most TOL_PARAMS (why not bit-equal: below), and the test prints the measured difference; the hubs
forwarded partials and results both ways and dropped none as another hierarchy; everything is torn down.

Why hierarchical and flat are compared with a tolerance: fp32 addition is not associative, and the two
documented orders differ: (g0 + g1) + (g2 + g3) at the hubs, ((g0 + g1) + g2) + g3 at the flat server. Each
step's mean gradient may then differ in its last bit (relative 6e-8), and STEPS steps of SGD with momentum
carry such differences into the parameters (O(0.1)) at about 1e-7 each; TOL_PARAMS = 1e-5 leaves room for
STEPS such steps, and a hub that lost, doubled or misordered a partial changes the parameters by far more
(a gradient is O(1e-3) times the learning rate). The bit-equal checks against the references are the
exact ones. Every process is bounded by a timeout. Addresses: 198.18.0.0/15 only.
Usage: probe_hubs_test.py --build BUILD_DIR.
"""
import json
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TRAINING = os.path.join(HERE, "..", "training")
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
sys.path.insert(0, TRAINING)
import hierbed  # noqa: E402
import livenet  # noqa: E402
import probe_scenario  # noqa: E402
import testbed  # noqa: E402
import train_model  # noqa: E402
from livenet import phubnet  # noqa: E402

STEPS = 40
WORLD = 4
HIER_JOB, FLAT_JOB = (61, 43000), (62, 42000)  # (job id, port base)
SECRET = "probe-hubs-system-test-secret"
TOL_PARAMS = 1e-5


def job(id_port, **extra):
    """The training job (the model's keys, deterministic mean), hierarchical or flat."""
    return phubnet.job(id_port[0], "probe-hubs-%d" % id_port[0], WORLD, train_model.key_list(), id_port[1],
                       reduce="mean", deterministic=True, secret=SECRET, allowed_sources=["198.18.0.0/15"], **extra)


def train(tb, build, out, rankmap, server_of_rack, id_port, modes, master_port, extra_env):
    """train_worker.py (modes in turn) on every host, each rank with its rankmap.env line and the phub server of
    its testbed rack. Returns [(rank, exit status, output tail)] of the ranks that failed."""
    os.makedirs(out)
    procs = []
    for h in tb.hosts:
        env = dict(os.environ, **rankmap[h["addr"]])
        env.update(extra_env, MASTER_PORT=str(master_port), PHUB_SERVER=server_of_rack[h["rack"]], PHUB_LCORES="1",
                   PHUB_TIMEOUT_MS="30000", PHUB_SECRET=SECRET, PHUB_JOB_4_DET="%d:%d" % id_port,
                   PYTHONPATH=os.path.join(build, "lib", "client", "python"), GLOO_SOCKET_IFNAME="eth0",
                   OMP_NUM_THREADS="1")
        argv = ["timeout", "120", "/usr/bin/python3", os.path.join(TRAINING, "train_worker.py"), "--steps",
                str(STEPS), "--out", out, "--modes", modes]
        procs.append((env["RANK"], tb.popen(h["ns"], argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True)))
    failed = []
    for rank, p in procs:
        try:
            text, _ = p.communicate(timeout=140)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
        if p.returncode != 0:
            failed.append((rank, p.returncode, text[-1500:]))
    return failed


def results(out, mode):
    """Rank 0's final parameters and every rank's losses of one mode of a run."""
    import torch
    losses = [json.load(open(os.path.join(out, "losses-w%d-r%d.json" % (WORLD, r))))[mode]["losses"]
              for r in range(WORLD)]
    return torch.load(os.path.join(out, "params-w%d-%s.pt" % (WORLD, mode))), losses


def main():
    build, check, ready = hierbed.begin()
    if not ready:
        return check.summary()
    probe = types.SimpleNamespace(probe=os.path.join(build, "app", "phub-probe", "phub-probe"), samples=32,
                                  bandwidth=False)
    tb = testbed.Testbed(racks=2, hosts_per_rack=2, hubs_per_rack=2, host_offloads=False,
                         prefix="%sp%d" % (testbed.FAMILY, os.getpid()))
    with tb:
        net = phubnet.Net(WORLD, build_dir=build, lcores=1, prefix=tb.prefix)  # configs and server start only
        logs, eal_prefixes = {}, [tb.prefix + "-flat"]
        try:
            work = net.tmp
            template = livenet.write(os.path.join(work, "hub-template.lua"), probe_scenario.hub_config_template(
                net, tb, job(HIER_JOB, ranks_by_rack="@RANKS_BY_RACK@")))
            shuffled = probe_scenario.interleaved_shuffle(tb.hosts, 1)
            plan_dir, wall = probe_scenario.run_probe(tb, probe, shuffled, work, ["--hub-config-template", template])
            with open(os.path.join(plan_dir, "report.json")) as f:
                got = {h["addr"]: h["group"] for h in json.load(f)["hosts"]}
            truth = {h["addr"]: h["rack"] for h in tb.hosts}
            ari = probe_scenario.adjusted_rand_index([truth[a] for a in sorted(truth)], [got.get(a) for a in sorted(truth)])
            plan = probe_scenario.planned_racks(plan_dir)
            print("probe: %.1f s, groups %s, planned racks %s" % (wall, got, plan), flush=True)
            check("the probe's groups are the testbed's racks (ARI %.3f)" % ari, ari == 1.0)
            rack_of_plan = {name: {truth[a] for a in hosts} for name, hosts, _ in plan}
            hub_files = sorted(f for f in os.listdir(plan_dir) if f.startswith("hub-") and f.endswith(".lua"))
            if not check("each planned rack lies in one testbed rack, one per rack, with a hub config each",
                         sorted(map(tuple, rack_of_plan.values())) == [(1,), (2,)] and
                         hub_files == sorted("hub-%s.lua" % name for name in rack_of_plan),
                         "%s, %s" % (rack_of_plan, hub_files)):
                return check.summary()
            servers = {}
            for name, _, _ in plan:  # each hub from the probe's config, unchanged
                (r,) = rack_of_plan[name]
                hub = tb.release_hub_address(r)
                logs[name] = os.path.join(work, "hub-%s.log" % name)
                eal_prefixes.append("%s-hub%s" % (tb.prefix, name))
                servers[name] = (hub["ns"], net.launch_server(hub["ns"], os.path.join(plan_dir, "hub-%s.lua" % name),
                                                              logs[name], timeout_s=240))
            flat = tb.release_hub_address(1, 2)
            flat_cfg = livenet.write(os.path.join(work, "flat.lua"), net.config_text(
                [job(FLAT_JOB)], server_ip=flat["addr"], file_prefix=eal_prefixes[0],
                socket_path=os.path.join(work, "ctl-flat.sock")))
            logs["flat"] = os.path.join(work, "flat.log")
            servers["flat"] = (flat["ns"], net.launch_server(flat["ns"], flat_cfg, logs["flat"], timeout_s=240))
            check("both hubs start from the probe's hub configs, and the flat server from its own", len(servers) == 3)

            rankmap = probe_scenario.parse_env_lines(os.path.join(plan_dir, "rankmap.env"))
            by_rack = ";".join(",".join(map(str, ranks)) for _, _, ranks in plan)
            outs = {"hier": os.path.join(work, "hier"), "flat": os.path.join(work, "flat")}
            failed = train(tb, build, outs["hier"], rankmap, {r: testbed.hub_addr(r) for r in (1, 2)}, HIER_JOB,
                           "phub-det,gloo-racks", 29611, {"PHUB_RANKS_BY_RACK": by_rack})
            check("training through the rack hubs completes %d steps (ranks by rack %s)" % (STEPS, by_rack),
                  not failed, str(failed))
            failed_flat = train(tb, build, outs["flat"], rankmap, {1: flat["addr"], 2: flat["addr"]}, FLAT_JOB,
                                "phub-det,gloo-ordered", 29612, {})
            check("training through the flat server completes %d steps" % STEPS, not failed_flat, str(failed_flat))
            if not failed and not failed_flat:
                import torch
                hier, hier_ref = results(outs["hier"], "phub-det"), results(outs["hier"], "gloo-racks")
                flat_res, flat_ref = results(outs["flat"], "phub-det"), results(outs["flat"], "gloo-ordered")
                check("hierarchical == gloo summing racks in order (parameters and losses, bits)",
                      torch.equal(hier[0], hier_ref[0]) and hier[1] == hier_ref[1],
                      "max param diff %.3g" % float((hier[0] - hier_ref[0]).abs().max()))
                check("flat == gloo summing in rank order (parameters and losses, bits)",
                      torch.equal(flat_res[0], flat_ref[0]) and flat_res[1] == flat_ref[1],
                      "max param diff %.3g" % float((flat_res[0] - flat_ref[0]).abs().max()))
                diff = float((hier[0] - flat_res[0]).abs().max())
                loss_diff = max(abs(x - y) for a, b in zip(hier[1], flat_res[1]) for x, y in zip(a, b))
                print("hierarchical vs flat after %d steps: max |param difference| %.3g (bit-equal: %s), max |loss "
                      "difference| %.3g; rank 0 loss %.4f -> %.4f" % (
                          STEPS, diff, torch.equal(hier[0], flat_res[0]), loss_diff, hier[1][0][0], hier[1][0][-1]),
                      flush=True)
                check("hierarchical final parameters equal the flat run's within %g (measured %.3g)" % (TOL_PARAMS, diff),
                      diff <= TOL_PARAMS)
            rcs, counters = hierbed.stop_servers(net, servers, logs)
            hubs = [name for name, _, _ in plan]
            jobs = {n: counters[n].get("job probe-hubs-%d" % HIER_JOB[0], {}) for n in hubs}
            for n in hubs:
                print("hub %s: exit %s, job: %s" % (n, rcs[n], {k: v for k, v in jobs[n].items() if v}), flush=True)
            check("every server stops on SIGINT with exit 0", all(rc == 0 for rc in rcs.values()), str(rcs))
            check("the hubs forwarded partials and results both ways", hierbed.forwarded_both_ways(jobs), str(jobs))
            check("no forward dropped as another hierarchy",
                  all(counters[n].get("drops", {}).get("fwd_fingerprint_mismatch", 0) == 0 for n in hubs))
        finally:
            hierbed.tear_down(check, net, logs, eal_prefixes)
    leaks = tb.leaks()
    check("nothing left (namespaces, processes, root nftables tables): %s" % leaks, not any(leaks.values()))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

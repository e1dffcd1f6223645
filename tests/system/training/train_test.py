#!/usr/bin/python3
"""Real PyTorch training through phub vs gloo, with 2 and 4 workers (one process per network namespace).

Every rank trains the same MLP (train_model.py: 85k parameters, SGD lr 0.05 momentum 0.9, 300 steps,
batch 32 per rank, the same synthetic rows in the same order in every mode) five times: plain gloo DDP,
gloo DDP with a rank-order-sum hook, DDP with the phub hook (allreduce mean), the same on a deterministic
phub job, and phub's ps-mode optimizer (the server runs SGD + momentum). The server is phub-server on
af_packet behind a veth and a bridge. What is compared (rank 0's final parameters, every rank's losses):
  phub-det vs gloo-ordered   bit-equal parameters and identical loss curves (fp32, same data order: the
                             server sums in rank order and multiplies by fp32(1/W), as the reference does)
  phub-det vs gloo (W = 2)   bit-equal too: with two workers every summation order gives the same bits
  phub vs gloo               max |param difference| <= TOL_PARAMS, max |loss difference| <= TOL_LOSS
                             (fp32 sums in arrival order vs gloo's ring order)
  phub-ps vs gloo            max |param difference| <= TOL_PS, losses within TOL_LOSS_PS (the server's
                             optimizer rounds each operation; PyTorch's CPU kernels fuse multiply-adds)
  every mode learns          the last 20 losses average below half of the first 20.
Usage: train_test.py --build BUILD_DIR [--steps N]   (root; cleans up every namespace and process)
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client"))
sys.path.insert(0, HERE)
import phubnet  # noqa: E402
import train_model  # noqa: E402

MODES = ["gloo", "gloo-ordered", "phub", "phub-det", "phub-ps"]
TOL_PARAMS = 1e-4    # parameters are O(0.1); ulp-level differences per step over 300 steps (measured ~1e-6)
TOL_LOSS = 1e-3
TOL_PS = 1e-4       # measured ~3e-7 at W = 2 and 4
TOL_LOSS_PS = 1e-3


def jobs(keys):
    out = []
    for world in (2, 4):
        base = 41000 + world * 100
        common = dict(keys=keys, secret="train-%d" % world)
        out.append(phubnet.job(20 + world * 10 + 1, "fast-%d" % world, world, port_base=base, reduce="mean", **common))
        out.append(phubnet.job(20 + world * 10 + 2, "det-%d" % world, world, port_base=base + 10, reduce="mean",
                               deterministic=True, **common))
        out.append(phubnet.job(20 + world * 10 + 3, "ps-%d" % world, world, port_base=base + 20, mode="ps",
                               reduce="mean", optimizer=dict(kind="momentum", lr=train_model.LR,
                                                             momentum=train_model.MOMENTUM), **common))
    return out


def run_world(net, world, steps, out):
    env = {"PYTHONPATH": os.path.join(net.build, "lib", "client", "python"), "PHUB_SERVER": phubnet.SERVER_IP,
           "PHUB_LCORES": str(net.lcores), "PHUB_TIMEOUT_MS": "30000", "PHUB_SECRET": "train-%d" % world,
           "MASTER_ADDR": phubnet.worker_ip(0), "MASTER_PORT": str(29500 + world), "WORLD_SIZE": str(world),
           "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
    base = 41000 + world * 100
    for kind, offset, jid in (("FAST", 0, 1), ("DET", 10, 2), ("PS", 20, 3)):
        env["PHUB_JOB_%d_%s" % (world, kind)] = "%d:%d" % (20 + world * 10 + jid, base + offset)
    procs = []
    for rank in range(world):
        argv = ["timeout", "170", "/usr/bin/python3", os.path.join(HERE, "train_worker.py"), "--steps", str(steps),
                "--out", out, "--modes", ",".join(MODES)]
        procs.append(net.popen(rank, argv, env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT))
    for rank, p in enumerate(procs):
        text, _ = p.communicate(timeout=200)
        if p.returncode != 0:
            raise RuntimeError("worker %d of %d failed (%d):\n%s" % (rank, world, p.returncode, text[-3000:]))


def compare(world, out, results):
    import torch
    params = {m: torch.load(os.path.join(out, "params-w%d-%s.pt" % (world, m))) for m in MODES}
    losses = [json.load(open(os.path.join(out, "losses-w%d-r%d.json" % (world, r)))) for r in range(world)]

    def pdiff(a, b):
        return float((params[a] - params[b]).abs().max())

    def ldiff(a, b):
        return max(abs(x - y) for r in losses for x, y in zip(r[a]["losses"], r[b]["losses"]))

    def divergence(a, b):
        """Where the loss curves of two modes first part (step, rank), for a failure's message."""
        for step in range(len(losses[0][a]["losses"])):
            for r, rl in enumerate(losses):
                if abs(rl[a]["losses"][step] - rl[b]["losses"][step]) > TOL_LOSS / 10:
                    return "; curves part at step %d (rank %d: %.6f vs %.6f)%s" % (
                        step, r, rl[a]["losses"][step], rl[b]["losses"][step], first_param_gap(a, b))
        return ""

    def first_param_gap(a, b):
        """The first step and chunk at which some rank's parameter sums differ by more than rounding does."""
        for step in range(len(losses[0][a]["sums"])):
            for r, rl in enumerate(losses):
                for chunk, (x, y) in enumerate(zip(rl[a]["sums"][step], rl[b]["sums"][step])):
                    if abs(x - y) > 1e-3:
                        gaps = [["%.1e" % abs(q[a]["sums"][s][chunk] - q[b]["sums"][s][chunk]) for q in losses]
                                for s in range(max(0, step - 2), min(step + 3, len(rl[a]["sums"])))]
                        return ("; parameters part after step %d (rank %d, chunk %d: sum %.6f vs %.6f; "
                                "gaps per rank from step %d: %s)") % (step, r, chunk, x, y, max(0, step - 2), gaps)
        return ""

    def check(name, ok, detail):
        results.append(ok)
        print("%s W=%d %-36s %s" % ("PASS" if ok else "FAIL", world, name, detail), flush=True)

    def bit_equal(a, b):
        same = torch.equal(params[a], params[b]) and all(r[a]["losses"] == r[b]["losses"] for r in losses)
        check("%s == %s (bits)" % (a, b), same, "max param diff %.3g, max loss diff %.3g" % (pdiff(a, b), ldiff(a, b)))

    bit_equal("phub-det", "gloo-ordered")
    if world == 2:
        bit_equal("phub-det", "gloo")
    d, l = pdiff("phub", "gloo"), ldiff("phub", "gloo")
    check("phub ~ gloo", d <= TOL_PARAMS and l <= TOL_LOSS,
          "max param diff %.3g (tol %g), max loss diff %.3g (tol %g)%s" % (d, TOL_PARAMS, l, TOL_LOSS,
                                                                        divergence("phub", "gloo")))
    d, l = pdiff("phub-ps", "gloo"), ldiff("phub-ps", "gloo")
    check("phub-ps ~ gloo", d <= TOL_PS and l <= TOL_LOSS_PS,
          "max param diff %.3g (tol %g), max loss diff %.3g (tol %g)%s" % (d, TOL_PS, l, TOL_LOSS_PS,
                                                                        divergence("phub-ps", "gloo")))
    for m in MODES:
        first = sum(losses[0][m]["losses"][:20]) / 20
        last = sum(losses[0][m]["losses"][-20:]) / 20
        check("%s learns" % m, last < first / 2, "loss %.3f -> %.3f in %.1fs, %d retransmits" % (
            first, last, losses[0][m]["seconds"], sum(r[m]["retransmits"] for r in losses)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--worlds", default="2,4")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("training test: needs root (namespaces, af_packet)")
        return 1
    keys = train_model.key_list()
    print("training test: model keys (the job's `keys`): %s" % ", ".join("%s=%d" % k for k in keys), flush=True)
    results, start = [], time.time()
    with phubnet.Net(4, build_dir=a.build) as net:
        net.start_server(jobs(keys), timeout_s=900)
        for world in map(int, a.worlds.split(",")):
            t0 = time.time()
            try:
                run_world(net, world, a.steps, net.tmp)
                print("training test: W=%d trained %d steps x %d modes in %.0fs" % (world, a.steps, len(MODES),
                                                                                  time.time() - t0), flush=True)
                compare(world, net.tmp, results)
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                results.append(False)
                print("FAIL W=%d %s" % (world, e), flush=True)
        counters, log = net.stop_server()
        if not all(results):
            print(log[-3000:])
    passed = sum(results)
    print("training test: %d passed, %d failed in %.0fs" % (passed, len(results) - passed, time.time() - start))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""One rank of tools/bench/train: real PyTorch training of a communication-bound MLP on synthetic data, once per
system, launched once per testbed host with the torchrun-style variables of phub-probe's rankmap.env (RANK is
the rank the probe planned for this host) and PHUB_SECRET, the phub jobs' secret.

Systems (each trains the same model from the same seed on the same batches, SGD with momentum 0.9 and a
warm-up + cosine LR schedule, torch.optim.lr_scheduler.LambdaLR):
  phub_ar        DDP (default group) with phub.torch.ddp_comm_hook against the flat server (--flat-server)
  phub_ps        phub.torch.PSOptimizer("sgd") against the flat server: the server runs the optimizer
  hier_ar        the hook against this host's rack hub (--rack-server): the hubs do the rest
  hier_ps        PSOptimizer against the rack hub
  gloo_<order>   plain DDP on a gloo group whose ranks follow --orders[<order>]
Data: batch `step` of every system is the same global batch (a seeded permutation of a fixed synthetic
dataset); each host takes the slice of its planned RANK, whatever rank it has in a gloo order, so the global
batch and so the mean gradient are the same in every system.

Per system, every rank records per step its wall time (zero_grad, forward, backward, optimizer step, the
scheduler) and its loss. After training, with every group's lr set to 0 (the weights no longer change), it
times, --comm-reps times each, after a barrier:
  compute   zero_grad, forward and backward without any exchange (DDP's no_sync(); the plain model for ps),
            and for DDP the local optimizer step
  exchange  the exchange alone on the current gradients: the gloo group's allreduce of all gradients in one
            flat tensor; the hook's job's allreduce of every parameter's key; PSOptimizer.step() (the
            server's optimizer runs in it)
Rank 0 also reads /proc/stat around the training loop: the CPU idle share of the whole machine, and the share
the testbed's own processes used (--netns-prefix; ranks, servers, delay lines).
Rank 0 writes {"systems": {name: {"step_s": [[per rank] per step], "loss": [[per rank] per step],
"compute_s": [[per rank] per rep], "exchange_s": [[per rank] per rep], "cpu_idle_share": x, ...}}} to --out.
"""
import time

_T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import phub.torch  # noqa: E402 (PYTHONPATH: the build's python package)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gloo_allreduce import order_groups  # noqa: E402
from hier_rank import bench_cpu_ticks, cpu_ticks, join  # noqa: E402

CLASSES = 10
DATASET = 8192  # samples of the synthetic dataset
MOMENTUM = 0.9


def make_model(in_features, hidden, depth, seed):
    """The MLP: in_features -> hidden (ReLU) x depth -> CLASSES, seeded."""
    torch.manual_seed(seed)
    layers, width = [], in_features
    for _ in range(depth):
        layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    layers.append(torch.nn.Linear(width, CLASSES))
    return torch.nn.Sequential(*layers)


def dataset(in_features, seed):
    """Inputs and labels of a random teacher (a linear map, argmax), seeded: learnable, not trivially."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(DATASET, in_features, generator=g)
    teacher = torch.randn(in_features, CLASSES, generator=g)
    return x, (x @ teacher).argmax(dim=1)


def batch(x, y, step, rank, world, per_rank, seed):
    idx = torch.randperm(DATASET, generator=torch.Generator().manual_seed(seed * 100003 + step))
    mine = idx[rank * per_rank:(rank + 1) * per_rank]
    return x[mine], y[mine]


def lr_factor(steps):
    """Linear warm-up over the first tenth of the steps, then cosine to a tenth of the peak."""
    warm = max(1, steps // 10)

    def factor(step):
        if step < warm:
            return (step + 1) / warm
        t = (step - warm) / max(1, steps - warm)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))
    return factor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", required=True)
    ap.add_argument("--orders", default="", help="JSON file {name: [addr, ...]} for the gloo systems")
    ap.add_argument("--self", dest="self_addr", required=True)
    ap.add_argument("--flat-server", default="")
    ap.add_argument("--rack-server", default="")
    ap.add_argument("--jobs", default="{}", help="JSON {system: [job id, port base]} for the phub systems")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--per-rank-batch", type=int, default=16)
    ap.add_argument("--in-features", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--comm-reps", type=int, default=3)
    ap.add_argument("--timeout-ms", type=int, default=120000)
    ap.add_argument("--out", default="")
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--netns-prefix", default="", help="the testbed's namespace prefix (its processes' CPU share)")
    a = ap.parse_args()
    torch.set_num_threads(1)

    rank, world, store, timeout = join(a.timeout_ms, a.iface)
    orders = {}
    if a.orders:
        with open(a.orders) as f:
            orders = json.load(f)
    systems = a.systems.split(",")
    jobs = json.loads(a.jobs)
    gloo_names = [s[len("gloo_"):] for s in systems if s.startswith("gloo_")]
    groups = order_groups(store, {n: orders[n] for n in gloo_names}, a.self_addr, world, a.iface, timeout)
    x, y = dataset(a.in_features, a.seed)
    setup_s = time.time() - _T0
    out = {}
    for system in systems:
        dist.barrier()
        out[system] = run(system, a, rank, world, groups, jobs, x, y)
    gathered = [None] * world
    dist.all_gather_object(gathered, out)
    if rank == 0 and a.out:
        merged = {}
        for system in systems:
            m = dict(out[system])
            for k in ("step_s", "loss", "compute_s", "exchange_s"):
                per_rank = [g[system][k] for g in gathered]
                m[k] = [list(v) for v in zip(*per_rank)]  # [step][rank]
            merged[system] = m
        with open(a.out, "w") as f:
            json.dump({"world": world, "setup_s": setup_s, "params": sum(
                p.numel() for p in make_model(a.in_features, a.hidden, a.depth, a.seed).parameters()),
                "systems": merged}, f)
    dist.barrier()
    dist.destroy_process_group()


def run(system, a, rank, world, groups, jobs, x, y):
    model = make_model(a.in_features, a.hidden, a.depth, a.seed)
    params = list(model.parameters())
    client_args = {}
    if system.startswith(("phub_", "hier_")):
        job, port_base = jobs[system]
        client_args = dict(servers=a.flat_server if system.startswith("phub_") else a.rack_server, job=job,
                           port_base=port_base, rank=rank, workers=world, timeout_ms=a.timeout_ms)
    ps = system.endswith("_ps")
    state, pg = None, None
    if ps:
        net = model
        opt = phub.torch.PSOptimizer(params, "sgd", lr=a.lr, momentum=MOMENTUM, **client_args)
    else:
        if system.startswith("gloo_"):
            pg = groups[system[len("gloo_"):]]
        net = torch.nn.parallel.DistributedDataParallel(model, process_group=pg)
        if client_args:
            state = phub.torch.HookState(net, **client_args)
            net.register_comm_hook(state, phub.torch.ddp_comm_hook)
        opt = torch.optim.SGD(params, lr=a.lr, momentum=MOMENTUM)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a.steps))
    loss_fn = torch.nn.functional.cross_entropy
    step_s, losses = [], []
    if rank == 0:
        idle0, total0 = cpu_ticks()
        own0 = bench_cpu_ticks(a.netns_prefix) if a.netns_prefix else 0
    for step in range(a.steps):
        xb, yb = batch(x, y, step, rank, world, a.per_rank_batch, a.seed)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        step_s.append(time.perf_counter() - t0)
        losses.append(loss.item())
    idle_share = bench_share = None
    if rank == 0:
        idle1, total1 = cpu_ticks()
        idle_share = (idle1 - idle0) / max(1, total1 - total0)
        if a.netns_prefix:
            bench_share = (bench_cpu_ticks(a.netns_prefix) - own0) / max(1, total1 - total0)

    compute_s, exchange_s = [], []
    for g in opt.param_groups:
        g["lr"] = 0.0  # from here on the weights stay as they are: the exchanges below change nothing
    for rep in range(a.comm_reps):
        xb, yb = batch(x, y, rep, rank, world, a.per_rank_batch, a.seed)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        if ps:
            loss_fn(net(xb), yb).backward()
        else:
            with net.no_sync():
                loss_fn(net(xb), yb).backward()
            opt.step()  # the local optimizer is compute too (a ps step's runs on the server, in its exchange)
        compute_s.append(time.perf_counter() - t0)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    for rep in range(a.comm_reps):
        dist.barrier()
        t0 = time.perf_counter()
        if ps:
            opt.step()
        elif state is not None:
            reqs = [state.client.allreduce_async(p.grad.reshape(-1), key=state.key_of[p.data_ptr()]) for p in params]
            phub.torch._wait_all(reqs)
        else:
            pg.allreduce([flat]).wait()
        exchange_s.append(time.perf_counter() - t0)
    client = opt.client if ps else (state.client if state else None)
    stats = client.stats() if client else {}
    if state is not None:
        state.close()
    elif client is not None:
        client.close()
    return {"step_s": step_s, "loss": losses, "compute_s": compute_s, "exchange_s": exchange_s,
            "cpu_idle_share": idle_share, "bench_cpu_share": bench_share, "phub_stats": stats}


if __name__ == "__main__":
    main()

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

All systems are built first and live for the whole run; they train in turns of --block steps (system 1 steps
0-4, system 2 steps 0-4, ..., system 1 steps 5-9, ...), each turn after a barrier, so that the shared machine's
load drifts over all of them alike. Per system, every rank records per step its wall time (zero_grad, forward, backward, optimizer step, the
scheduler) and its loss. After training, with every group's lr set to 0 (the weights no longer change), it
times, --comm-reps times each, after a barrier:
  compute   zero_grad, forward and backward without any exchange (DDP's no_sync(); the plain model for ps),
            and for DDP the local optimizer step
  exchange  the exchange alone on the current gradients: the gloo group's allreduce of all gradients in one
            flat tensor; the hook's job's allreduce of every parameter's key; PSOptimizer.step() (the
            server's optimizer runs in it)
Rank 0 also reads /proc/stat around each of the system's turns: the CPU idle share of the whole machine, and the share
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
    ap.add_argument("--block", type=int, default=5, help="steps a system trains before the next one's turn")
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
    runs = [System(name, a, rank, world, groups, jobs) for name in systems]
    for first in range(0, a.steps, a.block):
        for r in runs:
            dist.barrier()
            r.train(range(first, min(a.steps, first + a.block)), x, y)
    for r in runs:
        r.measure(x, y)
    out = {r.name: r.close() for r in runs}
    gathered = [None] * world
    dist.all_gather_object(gathered, out)
    if rank == 0 and a.out:
        merged = {}
        for system in systems:
            m = dict(out[system])
            for k in ("step_s", "loss", "compute_s", "exchange_s"):
                per_rank = [g[system][k] for g in gathered]
                m[k] = [list(v) for v in zip(*per_rank)]  # [step][rank]
            # Every rank's phub client counters after its first step (what a slow first step cost, by rank).
            m["phub_stats_first_step_by_rank"] = [
                {k: v for k, v in (g[system].get("phub_stats_first_step") or {}).items() if k in FIRST_STEP_KEYS}
                for g in gathered]
            merged[system] = m
        with open(a.out, "w") as f:
            json.dump({"world": world, "setup_s": setup_s, "params": sum(
                p.numel() for p in make_model(a.in_features, a.hidden, a.depth, a.seed).parameters()),
                "systems": merged}, f)
    dist.barrier()
    dist.destroy_process_group()


FIRST_STEP_KEYS = ("retransmits", "rerequests", "timeouts", "rejoins", "stalls_reported", "errors_received",
                   "fast_retransmits", "stale")


class System:
    """One system's model, optimizer and exchange, alive for the whole run: the systems train in turns of
    --block steps, so that a change of the shared machine's load falls on all of them alike."""

    def __init__(self, name, a, rank, world, groups, jobs):
        self.name, self.a, self.rank, self.world = name, a, rank, world
        model = make_model(a.in_features, a.hidden, a.depth, a.seed)
        self.params = list(model.parameters())
        client_args = {}
        if name.startswith(("phub_", "hier_")):
            job, port_base = jobs[name]
            client_args = dict(servers=a.flat_server if name.startswith("phub_") else a.rack_server, job=job,
                               port_base=port_base, rank=rank, workers=world, timeout_ms=a.timeout_ms)
        self.ps = name.endswith("_ps")
        self.state, self.pg = None, None
        if self.ps:
            self.net = model
            self.opt = phub.torch.PSOptimizer(self.params, "sgd", lr=a.lr, momentum=MOMENTUM, **client_args)
        else:
            if name.startswith("gloo_"):
                self.pg = groups[name[len("gloo_"):]]
            self.net = torch.nn.parallel.DistributedDataParallel(model, process_group=self.pg)
            if client_args:
                self.state = phub.torch.HookState(self.net, **client_args)
                self.net.register_comm_hook(self.state, phub.torch.ddp_comm_hook)
            self.opt = torch.optim.SGD(self.params, lr=a.lr, momentum=MOMENTUM)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_factor(a.steps))
        self.step_s, self.losses, self.compute_s, self.exchange_s = [], [], [], []
        self.first_step_stats = None  # the phub client's counters after the first training step (its cost)
        self.ticks = [0, 0, 0]  # idle, total, the testbed's own (rank 0 only)

    def train(self, steps, x, y):
        a, loss_fn = self.a, torch.nn.functional.cross_entropy
        if self.rank == 0:
            before = self._ticks()
        for step in steps:
            xb, yb = batch(x, y, step, self.rank, self.world, a.per_rank_batch, a.seed)
            t0 = time.perf_counter()
            self.opt.zero_grad()
            loss = loss_fn(self.net(xb), yb)
            loss.backward()
            self.opt.step()
            self.sched.step()
            self.step_s.append(time.perf_counter() - t0)
            self.losses.append(loss.item())
            if self.first_step_stats is None and self._client() is not None:
                self.first_step_stats = self._client().stats()
        if self.rank == 0:
            self.ticks = [t + n - b for t, n, b in zip(self.ticks, self._ticks(), before)]

    def _ticks(self):
        idle, total = cpu_ticks()
        return [idle, total, bench_cpu_ticks(self.a.netns_prefix) if self.a.netns_prefix else 0]

    def measure(self, x, y):
        """Compute-only steps, then the exchange alone, each rep after a barrier (the weights stay: lr 0)."""
        a, loss_fn = self.a, torch.nn.functional.cross_entropy
        for g in self.opt.param_groups:
            g["lr"] = 0.0
        for rep in range(a.comm_reps):
            xb, yb = batch(x, y, rep, self.rank, self.world, a.per_rank_batch, a.seed)
            dist.barrier()
            t0 = time.perf_counter()
            self.opt.zero_grad()
            if self.ps:
                loss_fn(self.net(xb), yb).backward()
            else:
                with self.net.no_sync():
                    loss_fn(self.net(xb), yb).backward()
                self.opt.step()  # the local optimizer is compute too (a ps step's runs on the server)
            self.compute_s.append(time.perf_counter() - t0)
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        for rep in range(a.comm_reps):
            dist.barrier()
            t0 = time.perf_counter()
            if self.ps:
                self.opt.step()
            elif self.state is not None:
                reqs = [self.state.client.allreduce_async(p.grad.reshape(-1), key=self.state.key_of[p.data_ptr()])
                        for p in self.params]
                phub.torch._wait_all(reqs)
            else:
                self.pg.allreduce([flat]).wait()
            self.exchange_s.append(time.perf_counter() - t0)

    def _client(self):
        return self.opt.client if self.ps else (self.state.client if self.state else None)

    def close(self):
        client = self._client()
        stats = client.stats() if client else {}
        if self.state is not None:
            self.state.close()
        elif client is not None:
            client.close()
        idle, total, own = self.ticks
        return {"step_s": self.step_s, "loss": self.losses, "compute_s": self.compute_s,
                "exchange_s": self.exchange_s, "cpu_idle_share": idle / max(1, total),
                "bench_cpu_share": own / max(1, total) if self.a.netns_prefix else None, "phub_stats": stats,
                "phub_stats_first_step": self.first_step_stats or {}}


if __name__ == "__main__":
    main()

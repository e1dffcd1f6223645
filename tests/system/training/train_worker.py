#!/usr/bin/python3
"""One rank of the training test: trains the shared model in several modes, one after the other, with the
same initial weights and data order, and writes its per-step losses (and rank 0 its final parameters).

Modes:
  gloo          DDP on the gloo process group, no hook (PyTorch's own allreduce: sum of grad / W)
  gloo-ordered  DDP with a gloo hook that all-gathers the gradients and sums them in rank order, then
                multiplies by fp32(1 / W): the arithmetic of phub's deterministic mean, as a reference
  gloo-racks    the same hook, summing each rack of PHUB_RANKS_BY_RACK ("0,1;2,3") in rank order, then the
                racks in order: the deterministic mean of hubs across racks (docs/hierarchy.md)
  phub          DDP with phub.torch.ddp_comm_hook on job PHUB_JOB_<W>_FAST (mean, arrival order)
  phub-det      the same on the deterministic job PHUB_JOB_<W>_DET
  phub-ps       no DDP: phub.torch.PSOptimizer on the ps job PHUB_JOB_<W>_PS (the server runs SGD+momentum)
(each PHUB_JOB_* variable is "job_id:port_base")
Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun names), PHUB_SERVER, PHUB_LCORES, ...
"""
import argparse
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_model as tm  # noqa: E402

import phub  # noqa: E402
import phub.torch  # noqa: E402


def rank_groups(mode):
    """The summation groups of a rank-order reference: for gloo-racks PHUB_RANKS_BY_RACK ("0,1;2,3": racks in
    order, each rack's ranks), for gloo-ordered one group of all ranks."""
    if mode == "gloo-ordered":
        return [list(range(dist.get_world_size()))]
    return [sorted(int(r) for r in rack.split(",")) for rack in os.environ["PHUB_RANKS_BY_RACK"].split(";")]


def ordered_hook(groups, bucket):
    """Reference: all-gather, sum each group's ranks in increasing rank order, then the groups' sums in group
    order, times fp32(1 / W): phub's deterministic mean, flat (one group) or across racks
    (docs/hierarchy.md, "Summation order")."""
    t = bucket.buffer()
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    acc = None
    for group in groups:
        partial = parts[group[0]].clone()
        for r in group[1:]:
            partial += parts[r]
        acc = partial if acc is None else acc.add_(partial)
    acc.mul_(torch.tensor(1.0 / dist.get_world_size(), dtype=torch.float32))
    fut = torch.futures.Future()
    fut.set_result(acc)
    return fut


def job_of(world, kind):
    job, port_base = os.environ["PHUB_JOB_%d_%s" % (world, kind)].split(":")
    return dict(job=int(job), port_base=int(port_base))


def train(mode, steps, world, rank):
    x, y = tm.dataset()
    model = tm.make_model()
    client = None
    if mode == "phub-ps":
        opt = phub.torch.PSOptimizer(model.parameters(), **job_of(world, "PS"))
        client = opt.client
        net = model
    else:
        net = torch.nn.parallel.DistributedDataParallel(model)
        if mode in ("gloo-ordered", "gloo-racks"):
            net.register_comm_hook(rank_groups(mode), ordered_hook)
        elif mode in ("phub", "phub-det"):
            state = phub.torch.HookState(net, **job_of(world, "DET" if mode == "phub-det" else "FAST"))
            net.register_comm_hook(state, phub.torch.ddp_comm_hook)
            client = state.client
        opt = torch.optim.SGD(model.parameters(), lr=tm.LR, momentum=tm.MOMENTUM)
    losses, sums = [], []
    for step in range(steps):
        xb, yb = tm.batch(x, y, step, rank, world)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        # Per chunk of 8192 elements of each key (the job's chunk_bytes): to locate a divergence.
        sums.append([float(b.sum()) for p in model.parameters() for b in p.detach().double().reshape(-1).split(8192)])
    stats = client.stats() if client else {}
    if client:
        client.close()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return losses, flat, stats, sums


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="gloo,gloo-ordered,phub,phub-det,phub-ps")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", required=True, help="directory for results")
    a = ap.parse_args()
    torch.set_num_threads(1)  # deterministic CPU kernels, and no oversubscription of the two CPUs
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=120)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    result = {}
    for mode in a.modes.split(","):
        dist.barrier()
        start = datetime.datetime.now()
        losses, flat, stats, sums = train(mode, a.steps, world, rank)
        seconds = (datetime.datetime.now() - start).total_seconds()
        result[mode] = dict(losses=losses, seconds=seconds, retransmits=stats.get("retransmits", 0), sums=sums)
        if rank == 0:
            torch.save(flat, os.path.join(a.out, "params-w%d-%s.pt" % (world, mode)))
    with open(os.path.join(a.out, "losses-w%d-r%d.json" % (world, rank)), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

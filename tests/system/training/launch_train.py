#!/usr/bin/python3
"""An ordinary DDP training script that exchanges its gradients through phub, the same file under every
launcher: mpirun, srun, torchrun, or one process per host with RANK and WORLD_SIZE set by hand.

It differs from a plain gloo DDP script in two places only: phub.launch.init_process_group("gloo") in place of
torch.distributed.init_process_group("gloo"), so that torch.distributed finds its rank under mpirun and srun
too, and the phub hook (phub.torch.HookState: phub.Client.from_env() inside, which reads the launcher's
variables and the job's PHUB_*). The model and data are the training test's (train_model.py).
Writes OUT/weights-rank<R>.pt (the final parameters, flat) and prints one line per rank:
  launch_train: rank R of W (<launcher>: <variables>) phub rank R of W; loss A -> B
Usage: launch_train.py --steps N --out DIR
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_model as tm  # noqa: E402

import phub.launch  # noqa: E402
import phub.torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    found = phub.launch.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = tm.dataset()
    model = tm.make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = phub.torch.HookState(ddp)
    ddp.register_comm_hook(state, phub.torch.ddp_comm_hook)
    opt = torch.optim.SGD(model.parameters(), lr=tm.LR, momentum=tm.MOMENTUM)
    losses = []
    for step in range(a.steps):
        xb, yb = tm.batch(x, y, step, rank, world)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    client_rank, client_workers = state.client.rank, state.client.workers
    state.close()
    torch.save(torch.cat([p.detach().reshape(-1) for p in model.parameters()]),
               os.path.join(a.out, "weights-rank%d.pt" % rank))
    print("launch_train: %s phub rank %d of %d; loss %.4f -> %.4f" % (
        phub.launch.describe(found), client_rank, client_workers, losses[0], losses[-1]), flush=True)
    # Every rank reaches the barrier before any tears gloo down: a rank that destroyed its group while a
    # peer's DDP still held a pending gloo pair once aborted that peer at exit ("terminate called without an
    # active exception", 1 run in 4 of the mpirun leg).
    dist.barrier()
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

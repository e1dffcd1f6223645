#!/usr/bin/python3
"""One rank of tools/bench/ddp: for each tensor size, the same processes time gloo's allreduce and phub's
(phub.Client.allreduce, the path the DDP hook takes) on the same links, interleaved rep by rep. A rep
starts after a gloo barrier; its time is the slowest rank's. Rank 0 writes JSON to --out.
Env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, PHUB_SERVER, PHUB_LCORES, PHUB_JOBS ("elems:job:port,...")."""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist

import phub


def timed(fn):
    dist.barrier()
    t0 = time.perf_counter()
    fn()
    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(dt, op=dist.ReduceOp.MAX)
    return float(dt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=300))
    result = {}
    for spec in os.environ["PHUB_JOBS"].split(","):
        elems, job, port = map(int, spec.split(":"))
        client = phub.Client.from_env(job=job, port_base=port, reduce="sum", timeout_ms=120000)
        client.register(elems)
        t = torch.empty(elems, dtype=torch.float32)
        t.fill_(rank + 1)
        client.allreduce(t, key=0)  # warm-up, and a check of the sum
        want = world * (world + 1) / 2
        if float(t[0]) != want or float(t[-1]) != want:
            raise SystemExit("phub returned %g, want %g" % (float(t[0]), want))
        t.fill_(1)
        dist.all_reduce(t)
        gloo, hub = [], []
        for _ in range(a.reps):
            t.fill_(rank + 1)
            gloo.append(timed(lambda: dist.all_reduce(t)))
            t.fill_(rank + 1)
            hub.append(timed(lambda: client.allreduce(t, key=0)))
        stats = client.stats()
        client.close()
        result[str(elems)] = dict(gloo=gloo, phub=hub, retransmits=stats["retransmits"], timeouts=stats["timeouts"],
                                  window=stats["window_packets"])
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

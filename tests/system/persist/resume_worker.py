#!/usr/bin/python3
"""One rank of the resume test: trains the training test's MLP (tests/system/training/train_model.py) with
phub.torch.PSOptimizer on a ps job (the server runs Adam), from the round the job starts at to --steps, and
goes on through a server restart: on phub.Resumed it repeats the steps from the round the job resumes at.

Every step's batch depends only on the step and the rank, so a repeated step sees the same data. Writes
record-<tag>-r<rank>.json (the start round, each resume, every attempt's loss per step, client counters) and,
rank 0, params-<tag>.pt (the final parameters, flat) into --out; its pid into <progress>-r<rank>.pid at start,
and the last step done into <progress>-r<rank> after each step.
Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torch.distributed, gloo: the run token) and
PHUB_SERVER, PHUB_PORT_BASE, PHUB_JOB, PHUB_LCORES, PHUB_SECRET, PHUB_TIMEOUT_MS (phub.Client.from_env).
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "training"))
import train_model as tm  # noqa: E402

import phub  # noqa: E402
import phub.torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--progress", required=True, help="prefix of the pid and progress files")
    ap.add_argument("--pace-ms", type=float, default=0, help="sleep after each step (time for the test to act)")
    a = ap.parse_args()
    torch.set_num_threads(1)  # deterministic CPU kernels
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    progress = "%s-r%d" % (a.progress, rank)
    with open(progress + ".pid", "w") as f:
        f.write(str(os.getpid()))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    x, y = tm.dataset()
    model = tm.make_model()
    opt = phub.torch.PSOptimizer(model.parameters())
    record = dict(start=opt.round, resumes=[], losses={})
    step = opt.round
    t0 = time.time()
    while step < a.steps:
        xb, yb = tm.batch(x, y, step, rank, world)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        try:
            opt.step()
        except phub.Resumed as e:
            record["resumes"].append(dict(at=step, round=e.round, seconds=time.time() - t0, message=str(e)))
            print("rank %d: step %d: %s" % (rank, step, e), flush=True)
            step = opt.round
            continue
        if opt.round != step + 1:
            raise RuntimeError("PSOptimizer.round is %d after step %d" % (opt.round, step))
        record["losses"].setdefault(str(step), []).append(loss.item())
        with open(progress + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(progress + ".tmp", progress)
        step += 1
        if a.pace_ms:
            time.sleep(a.pace_ms / 1000)
    record["seconds"] = time.time() - t0
    record["stats"] = opt.client.stats()
    opt.client.close()
    if rank == 0:
        torch.save(torch.cat([p.detach().reshape(-1) for p in model.parameters()]),
                   os.path.join(a.out, "params-%s.pt" % a.tag))
    with open(os.path.join(a.out, "record-%s-r%d.json" % (a.tag, rank)), "w") as f:
        json.dump(record, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Runs real torch.optim (SGD / Adam / AdamW) for the agg torch cross-check test.

Usage: torch_optim_ref.py DIR. DIR/jobs has one line per job:
    INDEX KIND LR MOMENTUM BETA1 BETA2 EPS WD ADAMW GRAD_SCALE STEPS
with DIR/w0_INDEX and DIR/grads_INDEX (STEPS rows) as little-endian float32. DIR/out_INDEX gets w, then the
momentum buffer or exp_avg, then exp_avg_sq (zeros where the optimizer has none). Exits 77 without torch.
"""
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as err:
    print(f"torch_optim_ref: {err}", file=sys.stderr)
    sys.exit(77)


def make_optimizer(param, kind, lr, momentum, beta1, beta2, eps, wd, adamw):
    if kind in ("sgd", "momentum", "nesterov"):
        return torch.optim.SGD([param], lr=lr, momentum=0.0 if kind == "sgd" else momentum,
                               nesterov=kind == "nesterov", weight_decay=wd, foreach=False)
    cls = torch.optim.AdamW if adamw else torch.optim.Adam
    return cls([param], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=wd, foreach=False)


def run_job(directory, fields):
    index, kind = fields[0], fields[1]
    lr, momentum, beta1, beta2, eps, wd = (float(x) for x in fields[2:8])
    adamw = fields[8] == "1"
    grad_scale = float(fields[9])
    steps = int(fields[10])
    w = torch.nn.Parameter(torch.from_numpy(np.fromfile(os.path.join(directory, f"w0_{index}"), dtype="<f4")))
    grads = np.fromfile(os.path.join(directory, f"grads_{index}"), dtype="<f4").reshape(steps, w.numel())
    opt = make_optimizer(w, kind, lr, momentum, beta1, beta2, eps, wd, adamw)
    for step in range(steps):
        w.grad = torch.from_numpy(grads[step].copy()) * grad_scale
        opt.step()
    state = opt.state[w]
    zeros = torch.zeros_like(w).detach()
    m = next((state[k] for k in ("momentum_buffer", "exp_avg") if state.get(k) is not None), zeros)
    v = state.get("exp_avg_sq", zeros)
    torch.cat([w.detach(), m, v]).numpy().astype("<f4").tofile(os.path.join(directory, f"out_{index}"))


def main():
    directory = sys.argv[1]
    with open(os.path.join(directory, "jobs"), encoding="ascii") as jobs:
        for line in jobs:
            if line.strip():
                run_job(directory, line.split())


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""One rank of the recipe test (recipe_test.py): real torch.optim recipes in parameter-server mode, each against
torch's own optimizer on the mean gradient; writes a JSON summary per phase into --out.

  recipe_worker.py --phase recipes|schedulers|ckpt-full|ckpt-first|ckpt-second --out DIR
Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, PHUB_SERVER, PHUB_SECRET, PHUB_JOB_<NAME> (job:port_base).

recipes      for each recipe of recipe_model.RECIPES: PSOptimizer (the server's optimizer) in a GradScaler-style
             loop (loss scaled, unscaled, a skipped step halves the scale) against the torch optimizer on the
             gloo-allreduced mean gradient, skipping the same steps; then the DDP hook (phub allreduce) against
             gloo DDP with the AdamW recipe. Every step: the largest parameter difference, and which steps skipped.
schedulers   (rank 0, a one-rank job) every torch.optim.lr_scheduler class, and a hand-written change of
             group["lr"], drive PSOptimizer and torch.optim.SGD side by side.
ckpt-*       Adam on a deterministic job: 200 steps at once (full), or 100 steps then torch.save (first) and,
             on a fresh server, load_state_dict and 100 more (second).
"""
import argparse
import datetime
import json
import math
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipe_model as rm  # noqa: E402

import phub  # noqa: E402
import phub.torch  # noqa: E402

torch.set_num_threads(1)


def job(name):
    jid, port = os.environ["PHUB_JOB_" + name.upper().replace("-", "_")].split(":")
    return dict(job=int(jid), port_base=int(port))


def mean_grads(model, world):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.div_(world)


def ps_recipe(name, rank, world, x, y):
    r = rm.RECIPES[name]
    model, ref = rm.make_model(), rm.make_model()
    opt = phub.torch.PSOptimizer(rm.groups(model, r["decay"]), r["optimizer"], **r["kwargs"], **job(name))
    ref_opt = rm.TORCH_CLASSES[r["optimizer"]](rm.groups(ref, r["decay"]), **r["kwargs"])
    sched, ref_sched = r["schedule"](opt), r["schedule"](ref_opt)
    scale, good, scales, skipped, ref_skipped, unchanged, worst, lrs = 2.0 ** 12, 0, [], [], [], True, 0.0, []
    for step in range(rm.STEPS):
        xb, yb = rm.batch(x, y, step, rank, world)
        # phub: a GradScaler-style loop (GradScaler itself needs CUDA in torch 1.13): scaled loss, unscaled
        # gradients, PSOptimizer's own check declares non-finite ones, a skipped step halves the scale.
        opt.zero_grad()
        (rm.loss_fn(model(xb), yb) * scale).backward()
        for p in model.parameters():
            p.grad.div_(scale)
        rm.poison(model, rank, step)
        before = [p.detach().clone() for p in model.parameters()]
        lrs.append([g["lr"] for g in opt.param_groups])
        opt.step()
        if opt.last_step_skipped:
            skipped.append(step)
            unchanged = unchanged and all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
            scale /= 2
            good = 0
        else:
            good += 1
            if good % 25 == 0:
                scale *= 2
        scales.append(scale)
        sched.step()
        # torch: the same recipe on the mean gradient, skipping where the mean is not finite.
        ref_opt.zero_grad()
        rm.loss_fn(ref(xb), yb).backward()
        rm.poison(ref, rank, step)
        mean_grads(ref, world)
        if rm.finite(ref):
            ref_opt.step()
        else:
            ref_skipped.append(step)
        ref_sched.step()
        worst = max(worst, rm.max_diff(model, ref))
    return dict(recipe=name, max_diff=worst, skipped=skipped, ref_skipped=ref_skipped, unchanged=unchanged,
                scales=scales, lrs=lrs[::25], stats=opt.client.stats())


def hook_recipe(rank, world, x, y):
    """DDP through phub's allreduce hook against gloo DDP, both with the AdamW recipe and the same skips."""
    r = rm.RECIPES["adamw-warmup-cosine"]
    nets, opts, scheds = [], [], []
    for use_phub in (True, False):
        net = torch.nn.parallel.DistributedDataParallel(rm.make_model())
        if use_phub:
            state = phub.torch.HookState(net, **job("hook"))
            net.register_comm_hook(state, phub.torch.ddp_comm_hook)
        opt = torch.optim.AdamW(rm.groups(net.module, r["decay"]), **r["kwargs"])
        nets.append(net)
        opts.append(opt)
        scheds.append(r["schedule"](opt))
    worst, skipped = 0.0, [[], []]
    for step in range(rm.STEPS):
        xb, yb = rm.batch(x, y, step, rank, world)
        for i, (net, opt, sched) in enumerate(zip(nets, opts, scheds)):
            opt.zero_grad()
            out = net(xb)
            loss = rm.loss_fn(out, yb)
            if rank == rm.INF_RANK and step in rm.INF_STEPS:
                loss = loss + math.inf * out.sum() * 0  # nan: as an overflow in the backward would give
            loss.backward()
            if rm.finite(net.module):
                opt.step()
            else:
                skipped[i].append(step)
            sched.step()
        worst = max(worst, rm.max_diff(nets[0].module, nets[1].module))
    state.close()
    return dict(recipe="hook-adamw-warmup-cosine", max_diff=worst, skipped=skipped[0], ref_skipped=skipped[1])


SCHEDULERS = {
    "LambdaLR": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e),
    "MultiplicativeLR": lambda o: torch.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.95),
    "StepLR": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
    "MultiStepLR": lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5], gamma=0.5),
    "ConstantLR": lambda o: torch.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3),
    "LinearLR": lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.2, total_iters=4),
    "ExponentialLR": lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8),
    "SequentialLR": lambda o: torch.optim.lr_scheduler.SequentialLR(
        o, [torch.optim.lr_scheduler.ConstantLR(o, factor=0.3, total_iters=3),
            torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.7)], milestones=[3]),
    "CosineAnnealingLR": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=6),
    "ChainedScheduler": lambda o: torch.optim.lr_scheduler.ChainedScheduler(
        [torch.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3),
         torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]),
    "ReduceLROnPlateau": lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, patience=1, factor=0.5),
    "CyclicLR": lambda o: torch.optim.lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2),
    "OneCycleLR": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=9),
    "CosineAnnealingWarmRestarts": lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3),
    "PolynomialLR": lambda o: torch.optim.lr_scheduler.PolynomialLR(o, total_iters=6, power=2.0),
}
SCHED_STEPS = 8


def schedulers():
    """Every scheduler class on PSOptimizer and on torch's SGD, side by side: the same lr and momentum each step,
    and weights within 1e-6 relative (torch's CPU kernels fuse multiply-adds; the server rounds each operation)."""
    p = torch.nn.Parameter(torch.linspace(-1, 1, 64))
    q = torch.nn.Parameter(p.detach().clone())
    opt = phub.torch.PSOptimizer([p], "sgd", lr=0.1, momentum=0.9, **job("sched"))
    ref = torch.optim.SGD([q], lr=0.1, momentum=0.9)
    results, gen = {}, torch.Generator().manual_seed(7)
    cases = list(SCHEDULERS) + ["hand-written"]
    for name in cases:
        for o in (opt, ref):  # each class starts from the same settings (the momentum buffers go on)
            for g in o.param_groups:
                g.pop("initial_lr", None)
                g["lr"], g["momentum"] = 0.1, 0.9
        sched = ref_sched = None
        if name != "hand-written":
            sched, ref_sched = SCHEDULERS[name](opt), SCHEDULERS[name](ref)
        worst, lrs, same = 0.0, [], True
        for step in range(SCHED_STEPS):
            if name == "hand-written":
                for o in (opt, ref):
                    o.param_groups[0]["lr"] = 0.02 * (step + 1)
            g = torch.randn(64, generator=gen)
            p.grad, q.grad = g.clone(), g.clone()
            lrs.append(opt.param_groups[0]["lr"])
            same = same and opt.param_groups[0]["lr"] == ref.param_groups[0]["lr"] and \
                opt.param_groups[0]["momentum"] == ref.param_groups[0]["momentum"]
            opt.step()
            ref.step()
            # relative, with the weights' RMS as the floor (values near 0 compare sanely)
            worst = max(worst, float(((p - q).abs() / (q.abs() + q.pow(2).mean().sqrt())).max()))
            if name == "ReduceLROnPlateau":
                sched.step(1.0)
                ref_sched.step(1.0)
            elif sched is not None:
                sched.step()
                ref_sched.step()
        results[name] = dict(max_rel_diff=worst, lrs=lrs, same_settings=same, distinct_lrs=len(set(lrs)))
    return results


def ckpt(phase, rank, world, x, y, out):
    """Adam, deterministic job: steps [0, 200) at once, or [0, 100) then a torch checkpoint, or [100, 200) from it."""
    model = rm.make_model()
    kwargs = dict(lr=2e-3, betas=(0.9, 0.99), eps=1e-7, weight_decay=0.0)
    fresh = phase != "ckpt-second"  # a new run of the job, forgetting what an earlier run left on the server
    opt = phub.torch.PSOptimizer(model.parameters(), "adam", **kwargs, **job("ckpt"), fresh_weights=fresh)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.995)
    first, last = {"ckpt-full": (0, 200), "ckpt-first": (0, 100), "ckpt-second": (100, 200)}[phase]
    path = os.path.join(out, "ckpt-rank%d.pt" % rank)
    if phase == "ckpt-second":
        saved = torch.load(path)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        sched.load_state_dict(saved["sched"])
    for step in range(first, last):
        xb, yb = rm.batch(x, y, step, rank, world)
        opt.zero_grad()
        rm.loss_fn(model(xb), yb).backward()
        opt.step()
        sched.step()
    if phase == "ckpt-first":
        sd = opt.state_dict()
        torch.save({"model": model.state_dict(), "optimizer": sd, "sched": sched.state_dict()}, path)
        keys = sorted(sd["state"][0].keys())
        step = float(sd["state"][0]["step"])
    else:
        keys, step = None, None
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.save(flat, os.path.join(out, "weights-%s-rank%d.pt" % (phase, rank)))
    return dict(phase=phase, state_keys=keys, state_step=step, rounds=opt.round)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    x, y = rm.dataset()
    if a.phase == "schedulers":
        summary = schedulers()
    else:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        if a.phase == "recipes":
            summary = [ps_recipe(n, rank, world, x, y) for n in rm.RECIPES] + [hook_recipe(rank, world, x, y)]
        else:
            summary = ckpt(a.phase, rank, world, x, y, a.out)
        dist.barrier()
    with open(os.path.join(a.out, "%s-rank%d.json" % (a.phase, rank)), "w") as f:
        json.dump(summary, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""One rank of the client oracle (tests/system/oracle/oracle_test.py): one case, then a JSON summary line.

  oracle_worker.py CASE_JSON        (environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, PHUB_*)

ddp: a DistributedDataParallel model (several buckets) with a comm hook that records a copy of each bucket as
     DDP passed it in, calls phub.torch.ddp_comm_hook, and overwrites the bucket with garbage (NaN or random
     values) before returning. After each backward every rank all-gathers (gloo) what every rank passed in and
     checks the future's value and the gradients DDP wrote against the server's arithmetic (server_math.py):
     bit for bit against the rank-order sum on a deterministic job; on an arrival-order job, bit for bit
     against one of the orders the server may add in (and within the fp32 summation bound); on every job all
     ranks must hold the same bits. Every third step feeds exactly summable bit patterns instead of the loss's
     gradients (oracle_model.exact_pattern), where every order gives the same bits.
ps:  phub.torch.PSOptimizer; the gradients are rounded to a few significant bits (exact sums in any order)
     and overwritten with NaN as soon as step() returns. Each rank replays the server's optimizer on the
     all-gathered gradient sum and checks its weights bit for bit; every rank must hold the same weights.
Exits 1 on any mismatch.
"""
import datetime
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_model as om  # noqa: E402
import server_math as sm  # noqa: E402

import phub  # noqa: E402
import phub.torch  # noqa: E402

STAT_FIELDS = ("retransmits", "fast_retransmits", "rerequests", "duplicates", "stale", "needless_resends",
               "timeouts", "packets_sent", "packets_received", "gso")
MAX_REPORTED = 4  # mismatches described in the summary


class Check:
    """Counts values compared and mismatches, and keeps the first few mismatches for the report."""

    def __init__(self):
        self.values = 0
        self.mismatches = 0
        self.first = []
        self.by_kind = {}  # mismatches per check, e.g. "future", "rank 1's future vs this rank's"

    def bits_equal(self, what, got, want):
        got = np.ascontiguousarray(got, dtype=np.float32)
        want = np.ascontiguousarray(want, dtype=np.float32)
        self.values += got.size
        bad = np.flatnonzero(sm.bits(got) != sm.bits(want))
        self.note(what, bad, got, want)
        return bad.size == 0

    def note(self, what, bad, got, want):
        self.mismatches += int(bad.size)
        if bad.size:
            self.by_kind[what] = self.by_kind.get(what, 0) + int(bad.size)
        for i in bad[:max(0, MAX_REPORTED - len(self.first))]:
            self.first.append("%s[%d]: got %r (0x%08x), want %r (0x%08x)" % (
                what, i, float(got[i]), int(sm.bits(got[i:i + 1])[0]), float(want[i]), int(sm.bits(want[i:i + 1])[0])))


def all_gather(t):
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return [p.numpy() for p in parts]


def job_env(spec):
    return dict(job=spec["job"], port_base=spec["port_base"], reduce=spec["reduce"], dtype=spec["dtype"])


# ---- DDP hook -----------------------------------------------------------------------------------------------
class Recorder:
    """The wrapper hook's state: what each bucket held when DDP called the hook, the future's value, and where
    each parameter's gradient lies in its bucket."""

    def __init__(self, phub_state, param_index, seed):
        self.phub = phub_state
        self.param_index = param_index
        self.garbage = torch.Generator().manual_seed(seed)
        self.step = 0
        self.reset()

    def reset(self):
        self.inputs, self.outputs, self.layout = {}, {}, {}


def oracle_hook(rec, bucket):
    buf = bucket.buffer()
    index = bucket.index()
    rec.inputs[index] = buf.clone()
    elem = buf.element_size()
    rec.layout[index] = [(rec.param_index[p.data_ptr()], (g.data_ptr() - buf.data_ptr()) // elem, g.numel())
                         for p, g in zip(bucket.parameters(), bucket.gradients())]
    fut = phub.torch.ddp_comm_hook(rec.phub, bucket)
    # DDP may reuse the bucket as soon as the hook returns: rewrite it now.
    if rec.step % 2 == 0:
        buf.fill_(float("nan"))
    else:
        buf.copy_(torch.randn(buf.shape, generator=rec.garbage, dtype=buf.dtype) * 1e3)

    def keep(f):
        value = f.value()
        rec.outputs[index] = value.detach().clone()
        return value

    return fut.then(keep)


def check_ddp_step(spec, rec, params, check, stats):
    """All-gathers the recorded bucket inputs and checks the future's values and the gradients of this step."""
    world = dist.get_world_size()
    order = sorted(rec.inputs)
    local_in = torch.cat([rec.inputs[i].float() for i in order])
    rows = all_gather(local_in)
    got = torch.cat([rec.outputs[i].float() for i in order]).numpy()
    hook_divide = spec["reduce"] == "sum"
    if spec["deterministic"]:
        want = sm.allreduce_result(rows, list(range(world)), spec["reduce"], spec["dtype"], hook_divide)
        check.bits_equal("future", got, want)
    else:
        candidates = [sm.bits(sm.allreduce_result(rows, o, spec["reduce"], spec["dtype"], hook_divide))
                      for o in sm.arrival_orders(world)]
        matched = np.zeros(got.size, dtype=bool)
        for c in candidates:
            matched |= sm.bits(got) == c
        rank_order = candidates[0]
        check.values += got.size
        check.note("future (no arrival order gives it)", np.flatnonzero(~matched), got, sm.allreduce_result(
            rows, list(range(world)), spec["reduce"], spec["dtype"], hook_divide))
        stats["other_order"] += int(np.count_nonzero(matched & (sm.bits(got) != rank_order)))
        # The stated bound, u = 2^-24 (to first order; the factor 1 + 2^-21 covers the higher terms):
        #   |result - exact/W| <= ((W-1) u sum|x_i|) / W + u |result| per final rounding (the division; or
        #   fp32(1/W) and the product) + 2^-150 per rounding in the subnormal range (at most 4).
        if spec["dtype"] == "fp32":
            exact = np.sum(np.stack(rows).astype(np.float64), axis=0)
            absum = np.sum(np.abs(np.stack(rows).astype(np.float64)), axis=0)
            divisor = world if (hook_divide or spec["reduce"] == "mean") else 1
            last = 1 if hook_divide else 2  # the division, or the product by fp32(1/W) (itself rounded)
            u = 2.0**-24 * (1 + 2.0**-21)
            bound = (world - 1) * u * absum / divisor + last * u * np.abs(got.astype(np.float64)) + 4 * 2.0**-150
            err = np.abs(got.astype(np.float64) - exact / divisor)
            check.note("future (outside the summation bound)", np.flatnonzero(err > bound), got,
                       (exact / divisor).astype(np.float32))
            stats["worst_of_bound"] = max(stats["worst_of_bound"], float(np.max(err / bound)))
        want = got  # the gradients must be the future's value
    # Every rank got the same bits from the server (a wrong sum on every rank is the server's, or every rank's
    # pushes'; a value only one rank holds went wrong in that rank).
    for r, o in enumerate(all_gather(torch.from_numpy(got))):
        check.bits_equal("rank %d's future vs this rank's" % r, o, got)
    # DDP copies the future's value into the gradients.
    base = 0
    for i in order:
        for pi, offset, n in rec.layout[i]:
            grad = params[pi].grad.detach().reshape(-1).float().numpy()
            check.bits_equal("grad of key %d" % pi, grad, want[base + offset:base + offset + n])
        base += rec.inputs[i].numel()
    stats["buckets"] = max(stats["buckets"], len(order))


def run_ddp(spec, rank, world):
    model = om.make_model()
    params = list(model.parameters())
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(spec["bucket_cap_mb"] * 1024 * 1024)  # the first bucket small too
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=spec["bucket_cap_mb"],
                                                    gradient_as_bucket_view=spec["bucket_view"])
    state = phub.torch.HookState(ddp, **job_env(spec))
    rec = Recorder(state, {p.data_ptr(): i for i, p in enumerate(params)}, seed=rank + 7)
    ddp.register_comm_hook(rec, oracle_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    check = Check()
    stats = dict(other_order=0, worst_of_bound=0.0, buckets=0, pattern_steps=0)
    for step in range(spec["steps"]):
        rec.reset()
        rec.step = step
        x, y = om.batch(step, rank)
        opt.zero_grad()
        out = ddp(x)
        pattern = step % 3 == 2
        if pattern:  # gradients with known bits: d/dp sum(p * C) = C exactly (the model's output adds 0)
            stats["pattern_steps"] += 1
            loss = (out * 0).sum()
            for k, p in enumerate(params):
                c = torch.from_numpy(om.exact_pattern(step, rank, k, p.numel())).reshape(p.shape)
                loss = loss + (p * c).sum()
        else:
            loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        check_ddp_step(spec, rec, params, check, stats)
        if not pattern:
            opt.step()
    result = dict(steps=spec["steps"], values=check.values, mismatches=check.mismatches, first=check.first,
                  by_kind=check.by_kind, **stats)
    result["stats"] = {k: v for k, v in state.client.stats().items() if k in STAT_FIELDS}
    state.close()
    return result


# ---- ps optimizer -------------------------------------------------------------------------------------------
def flat(tensors):
    return torch.cat([t.detach().reshape(-1).float() for t in tensors]).numpy().copy()


def run_ps(spec, rank, world):
    model = om.make_model()
    params = list(model.parameters())
    if rank != 0:  # the other ranks must receive rank 0's weights from the server
        with torch.no_grad():
            for p in params:
                p.mul_(-3.0)
    opt = phub.torch.PSOptimizer(model.parameters(), **job_env(spec))
    check = Check()
    w0 = flat(params)
    for r, w in enumerate(all_gather(torch.from_numpy(w0))):
        check.bits_equal("initial weights of rank %d vs this rank's" % r, w, w0)
    server = [sm.Optimizer(spec["optimizer"], world, spec["reduce"], w0)]
    unit_log2, limit = (-12, 255) if spec["dtype"] == "bf16" else (-18, 1 << 20)
    for step in range(spec["steps"]):
        x, y = om.batch(step, rank)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            for p in params:
                p.grad.copy_(torch.from_numpy(om.quantize_exact(p.grad.numpy(), unit_log2, limit)).reshape(p.shape))
        pushed = flat([p.grad for p in params])
        opt.step()
        with torch.no_grad():  # step() has returned: the gradients are ours again
            for p in params:
                p.grad.fill_(float("nan"))
        got = flat(params)
        rows = all_gather(torch.from_numpy(pushed))
        total = sm.sum_in_order(rows, list(range(world)))
        exact = np.sum(np.stack(rows).astype(np.float64), axis=0)
        if not np.array_equal(total.astype(np.float64), exact):
            raise RuntimeError("step %d: the quantized gradients do not sum exactly: the oracle's premise" % step)
        want = server[0].step(total)
        if spec["dtype"] == "bf16":
            want = sm.to_bf16(want)  # the server narrows its fp32 weights to the job's dtype
        check.bits_equal("weights", got, want)
        for r, w in enumerate(all_gather(torch.from_numpy(got))):
            check.bits_equal("rank %d's weights vs this rank's" % r, w, got)
    result = dict(steps=spec["steps"], values=check.values, mismatches=check.mismatches, first=check.first,
                  by_kind=check.by_kind, weight_change=float(np.max(np.abs(got - w0))))
    result["stats"] = {k: v for k, v in opt.client.stats().items() if k in STAT_FIELDS}
    opt.client.close()
    return result


def main():
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    result = run_ddp(spec, rank, world) if spec["kind"] == "ddp" else run_ps(spec, rank, world)
    result["rank"] = rank
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(result), flush=True)
    return 0 if result["mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

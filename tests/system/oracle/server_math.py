"""What phub-server computes, element by element, in numpy float32: the reference of the client oracle.

Written from lib/engine/src/chunk.cpp (finish_segment) and lib/agg (kernel_body.hpp, optimizer_body.hpp,
coeffs.cpp, scalar_convert.hpp): every operation is one IEEE fp32 +, *, / or sqrt, rounded once (the kernels
are built with -ffp-contract=off, so no FMA); numpy float32 ufuncs do the same. Constants are derived in
double from the config's float values and rounded to float, as derive_coeffs does.
"""
import itertools
import math

import numpy as np

F32 = np.float32


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def to_bf16(a):
    """fp32 -> bf16 -> fp32, round to nearest even (float_to_bf16 in scalar_convert.hpp; torch's .to(bfloat16))."""
    b = bits(a).astype(np.uint64)
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    rounded = np.where(nan, (b >> 16) | 0x40, rounded).astype(np.uint32)
    return (rounded << 16).view(np.float32)


def mean_scale(workers):
    return F32(1.0) / F32(workers)  # 1.0f / static_cast<float>(m.workers)


def sum_in_order(rows, order):
    """The server's running sum: the first contribution initialises, the others add in `order`."""
    acc = rows[order[0]].copy()
    for r in order[1:]:
        acc = acc + rows[r]
    return acc


def arrival_orders(workers):
    """Every order the server may add W contributions in; orders that differ only in the first two give the
    same bits (a + b == b + a), so one of each pair is kept."""
    return [p for p in itertools.permutations(range(workers)) if p[0] < p[1]]


def allreduce_result(rows, order, reduce, job_dtype, hook_divide):
    """The result the hook returns for one summation order: the server sums (in the job's dtype, widened), scales
    by fp32(1/W) for "mean", narrows to the job's dtype; the hook widens it and divides by W for "sum"."""
    if job_dtype == "bf16":
        rows = [to_bf16(r) for r in rows]
    acc = sum_in_order(rows, order)
    if reduce == "mean":
        acc = acc * mean_scale(len(rows))
    if job_dtype == "bf16":
        acc = to_bf16(acc)
    if hook_divide:
        acc = acc / F32(len(rows))  # torch's div_ by an integer on an fp32 tensor: IEEE division
    return acc


class Optimizer:
    """The server's optimizer for one flat fp32 parameter vector, replayed step by step (optimizer_body.hpp)."""

    def __init__(self, opt, workers, reduce, weights):
        self.kind = opt.get("kind", "sgd")
        self.lr = F32(opt.get("lr", 0.01))
        self.momentum = F32(opt.get("momentum", 0.9))
        self.beta1, self.beta2 = F32(opt.get("beta1", 0.9)), F32(opt.get("beta2", 0.999))
        self.eps = F32(opt.get("eps", 1e-8))
        self.wd = F32(opt.get("weight_decay", 0.0))
        self.adamw = bool(opt.get("adamw", False))
        self.grad_scale = mean_scale(workers) if reduce == "mean" else F32(1.0)
        self.w = np.array(weights, dtype=np.float32)
        self.m = np.zeros_like(self.w)
        self.v = np.zeros_like(self.w)
        self.t = 0

    def step(self, grad_sum):
        self.t += 1
        g = grad_sum * self.grad_scale
        w, m, v = self.w, self.m, self.v
        if self.kind == "adam":
            lr, b1, b2, t = float(self.lr), float(self.beta1), float(self.beta2), float(self.t)
            one_minus_b1, one_minus_b2 = F32(1.0 - b1), F32(1.0 - b2)
            bias_corr2_sqrt = F32(math.sqrt(1.0 - math.pow(b2, t)))
            neg_step_size = F32(-(lr / (1.0 - math.pow(b1, t))))
            if self.wd != 0 and not self.adamw:
                g = g + w * self.wd
            if self.wd != 0 and self.adamw:
                w = w * F32(1.0 - lr * float(self.wd))
            m = m * self.beta1 + g * one_minus_b1
            v = v * self.beta2 + (g * one_minus_b2) * g
            denom = np.sqrt(v) / bias_corr2_sqrt + self.eps
            w = w + (m * neg_step_size) / denom
        else:
            if self.wd != 0:
                g = g + w * self.wd
            if self.kind != "sgd":
                m = g.copy() if self.t == 1 else m * self.momentum + g
                g = g + m * self.momentum if self.kind == "nesterov" else m
            w = w + g * F32(-float(self.lr))
        self.w, self.m, self.v = w, m, v
        return w

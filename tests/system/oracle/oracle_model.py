"""The client oracle's model, data and gradient patterns, shared by the driver (keys) and the workers.

An MLP of odd sizes: its tensors do not line up with chunks (8192 fp32 elements) or packets, and with a small
bucket_cap_mb DDP spreads them over several buckets.
"""
import numpy as np

LAYERS = [29, 211, 157, 61, 7]  # features in, hidden, hidden, hidden, classes
SEED = 1313


def key_list():
    """(name, elements) of every trainable parameter in named_parameters() order: the phub job's keys."""
    keys = []
    for i, (fan_in, fan_out) in enumerate(zip(LAYERS, LAYERS[1:])):
        keys.append(("%d.weight" % (2 * i), fan_in * fan_out))
        keys.append(("%d.bias" % (2 * i), fan_out))
    return keys


def make_model():
    import torch
    torch.manual_seed(SEED)
    mods = []
    for fan_in, fan_out in zip(LAYERS, LAYERS[1:]):
        mods += [torch.nn.Linear(fan_in, fan_out), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods[:-1])


def batch(step, rank, rows=16):
    """This rank's inputs and labels for a step (different on every rank and step)."""
    import torch
    g = torch.Generator().manual_seed(SEED * 1000003 + step * 131 + rank)
    x = torch.randn(rows, LAYERS[0], generator=g)
    y = torch.randint(0, LAYERS[-1], (rows,), generator=g)
    return x, y


def exact_pattern(step, rank, key, n):
    """Gradient values whose sum over up to 4 ranks is exact in fp32 in every order: at each element every rank
    has the same binary exponent (chosen per element from subnormals to 2^100) and a signed mantissa of at most
    21 bits. The elements' exponents span the whole range, so a sum that is off by one ulp anywhere shows."""
    shared = np.random.default_rng([SEED, step, key])
    exponent = shared.integers(-149, 101, n)  # 2^-149 is the smallest subnormal
    own = np.random.default_rng([SEED, step, key, rank + 1])
    mantissa = own.integers(1, 1 << 21, n) * own.choice([-1, 1], n)
    return np.ldexp(mantissa.astype(np.float64), exponent).astype(np.float32)  # exact: representable


def quantize_exact(g, unit_log2, limit):
    """g (float32 array) rounded to multiples of 2^unit_log2 with |g| <= limit units: with few significant bits,
    sums of a few ranks' values are exact in fp32 whatever the order."""
    units = np.clip(np.rint(np.ldexp(g.astype(np.float64), -unit_log2)), -limit, limit)
    return np.ldexp(units, unit_log2).astype(np.float32)

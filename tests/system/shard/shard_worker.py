#!/usr/bin/python3
"""One rank of a shard-test job through the Python package: seeded data, every result written to a file.

  shard_worker.py KIND KEYS ROUNDS OUT      (environment: phub.Client.from_env's: RANK, WORLD_SIZE, PHUB_*)

KIND allreduce: each round pushes float32 (PHUB_DTYPE fp32) or bf16 bit patterns (bf16: uint16 arrays handed to
the C API, numpy has no bf16) drawn from a generator seeded by (rank, round, key), and checks the result against
its own reference: with two workers the sum is one IEEE addition, a + b == b + a, so any server, sharded or
not, must give these bits (bf16: the sum of the widened values rounded to nearest even, scaled by fp32(1/W) for
"mean" before the rounding). KIND ps: rank 0 sends seeded initial weights, every round each rank pushes seeded
gradients (rounded to 8 significant bits: sums exact) and receives the weights; there is no reference here, the
test compares the weights bit for bit with another server's.
OUT receives every result of every round (raw bytes, in order). Prints one JSON line; exits 1 on a mismatch,
2 on a phub error (the line then carries its code and message).
"""
import json
import sys

import numpy as np

import phub
from phub import _lib
from phub.errors import PhubError, check


def seeded(rank, rnd, key, elems, salt=0):
    return np.random.default_rng([salt, rank, rnd, key]).standard_normal(elems).astype(np.float32)


def bf16_bits(a):
    """float32 -> bf16 bit patterns (uint16), round to nearest even (no NaN here)."""
    b = a.view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def widen(bits16):
    return (bits16.astype(np.uint32) << 16).view(np.float32)


def allreduce(c, keys, rounds, out):
    mismatched = 0
    scale = np.float32(1) / np.float32(c.workers) if c.reduce == "mean" else np.float32(1)
    for r in range(rounds):
        bufs, refs = [], []
        for k, n in enumerate(keys):
            rows = [seeded(q, r, k, n) for q in range(c.workers)]
            if c.dtype == "bf16":
                rows = [bf16_bits(x) for x in rows]
                acc = widen(rows[0])
                for x in rows[1:]:
                    acc = acc + widen(x)
                refs.append(bf16_bits(acc * scale) if c.reduce == "mean" else bf16_bits(acc))
            else:
                acc = rows[0].copy()
                for x in rows[1:]:
                    acc = acc + x
                refs.append(acc * scale if c.reduce == "mean" else acc)
            bufs.append(rows[c.rank].copy())
        if c.dtype == "bf16":  # numpy has no bf16 dtype: the C API on the uint16 buffers
            for k, b in enumerate(bufs):
                check(_lib.lib.phub_allreduce(c._h, k, b.ctypes.data))
        else:
            for q in [c.allreduce_async(b, key=k) for k, b in enumerate(bufs)]:
                q.wait()
        for b, ref in zip(bufs, refs):  # bit patterns (bf16 ones are uint16 already)
            mismatched += int(np.count_nonzero(b.view(np.uint16 if c.dtype == "bf16" else np.uint32) !=
                                               ref.view(np.uint16 if c.dtype == "bf16" else np.uint32)))
            out.write(b.tobytes())
    return mismatched


def ps(c, keys, rounds, out):
    weights = [seeded(0, 0, k, n, salt=1) for k, n in enumerate(keys)]
    if c.rank != 0:
        weights = [np.zeros_like(w) for w in weights]
    c.init(weights)
    for w in weights:
        out.write(w.tobytes())
    for r in range(rounds):
        grads = []
        for k, n in enumerate(keys):
            g = seeded(c.rank, r, k, n, salt=2)
            g = (g.view(np.uint32) & np.uint32(0xFFFF8000)).view(np.float32)  # 8 significant bits: exact sums
            grads.append(g)
        c.step(weights, grads)
        for w in weights:
            out.write(w.tobytes())
    return 0


def main():
    kind, keys, rounds, path = sys.argv[1], [int(k) for k in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4]
    try:
        c = phub.Client.from_env()
        for n in keys:
            c.register(n)
        with open(path, "wb") as out:
            mismatched = (allreduce if kind == "allreduce" else ps)(c, keys, rounds, out)
        stats = c.stats()
        c.close()
    except PhubError as e:
        print(json.dumps(dict(ok=False, code=e.name,
                              message=str(e))), flush=True)
        return 2
    print(json.dumps(dict(ok=mismatched == 0, mismatched=mismatched, retransmits=stats.get("retransmits"))),
          flush=True)
    return 0 if mismatched == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""One rank of a phub allreduce job driven through the Python package (numpy, zero-copy), checked against
a reference computed here: every rank's data is a function of (rank, round, key), so each rank can sum all
of them itself, in rank order, in float32. Deterministic jobs must match bit for bit; others (fp32 sums in
arrival order) within twice the error bound of any summation order, (W - 1) * 2^-24 * sum |x_i| (times the mean's
scale). argv: keys, rounds, exact|close, [allreduce|split] (split: push every key, then pull each).
Settings come from the environment (phub.Client.from_env).
Prints one JSON line."""
import json
import sys
import time

import numpy as np

import phub


def data(rank, rnd, key, elems):
    rng = np.random.default_rng(1000003 * rnd + 7919 * key + rank)
    return rng.standard_normal(elems).astype(np.float32)


def main():
    keys = [int(k) for k in sys.argv[1].split(",")]
    rounds = int(sys.argv[2])
    exact = sys.argv[3] == "exact"
    split = len(sys.argv) > 4 and sys.argv[4] == "split"
    c = phub.Client.from_env()
    for k in keys:
        c.register(k)
    worst, mismatched, start = 0.0, 0, time.time()
    for r in range(rounds):
        bufs = [data(c.rank, r, k, n) for k, n in enumerate(keys)]
        if split:  # phub_push of every key, then phub_pull of each (results wait in the client meanwhile)
            for k, b in enumerate(bufs):
                c.push(b, key=k)
            for k, b in enumerate(bufs):
                c.pull(b, key=k)
        else:
            reqs = [c.allreduce_async(b, key=k) for k, b in enumerate(bufs)]
            for q in reqs:
                q.wait()
        for k, n in enumerate(keys):
            ref = data(0, r, k, n)
            magnitude = np.abs(ref).astype(np.float64)
            for q in range(1, c.workers):
                ref = ref + data(q, r, k, n)  # rank order, float32, like the server's deterministic mode
                magnitude += np.abs(data(q, r, k, n))
            scale = np.float32(1.0 / c.workers) if c.reduce == "mean" else np.float32(1)
            ref = ref * scale
            # Both sums (the server's and this one) are within (W - 1) u sum|x| of the exact sum.
            bound = 2 * (c.workers - 1) * 2.0 ** -24 * magnitude * float(scale) + 2.0 ** -149
            mismatched += int(np.count_nonzero(bufs[k] != ref))
            worst = max(worst, float(np.max(np.abs(bufs[k].astype(np.float64) - ref) / bound)))
    ok = mismatched == 0 if exact else worst <= 1.0
    print(json.dumps(dict(rank=c.rank, rounds=rounds, mismatched=mismatched, worst=worst, ok=ok,
                          seconds=round(time.time() - start, 3), stats=c.stats())))
    c.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

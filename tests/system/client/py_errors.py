#!/usr/bin/python3
"""One client of a failure case against the real phub-server, through the Python package: it makes the
mistake named by argv[1] and prints one JSON line with the error code's name and message (or "ok").
  reduce           the client expects a mean, the job sums                    -> config_mismatch
  round            two rounds by one client, then a fresh client that joins the job's current epoch
                   instead of restarting the job: rank 0 is still held there by
                   the first client's process                                 -> epoch
  restart          the same, but the fresh client restarts the job (the default for rank 0): a new
                   epoch, its rounds start again                              -> ok
  chunk_map        the client's first key is larger than the job's           -> chunk_map
  not_initialized  ps: a pull before rank 0 (connected: the job's epoch is its run's) sent the
                   initial weights                                            -> not_initialized
  stalled          allreduce of a 2-worker job with only this rank running    -> round_stalled
Settings (server, job, port, keys, timeout) come from the environment (phub.Client.from_env) and argv[2]
(comma-separated key sizes)."""
import json
import sys

import numpy as np

import phub


def main():
    case = sys.argv[1]
    keys = [int(k) for k in sys.argv[2].split(",")]
    overrides = {"reduce": "mean"} if case == "reduce" else {"restart_job": False} if case == "round" else {}
    if case == "chunk_map":
        keys[0] += 8192
    bufs = [np.ones(n, dtype=np.float32) for n in keys]
    if case in ("round", "restart"):  # a first run of the job: its rounds move on to 2
        with phub.Client.from_env() as first:
            for n in keys:
                first.register(n)
            for _ in range(2):
                for k, b in enumerate(bufs):
                    first.allreduce(b, key=k)
    rank0 = phub.Client.from_env(rank=0) if case == "not_initialized" else None  # joins, never inits
    c = phub.Client.from_env(**overrides)
    for n in keys:
        c.register(n)
    outcome = dict(case=case, code="ok", message="")
    try:
        if case == "not_initialized":
            c.pull(bufs[0], key=0)
        else:
            for k, b in enumerate(bufs):
                c.allreduce(b, key=k)
    except phub.PhubError as e:
        outcome.update(code=e.name, message=str(e))
    print(json.dumps(outcome))
    c.close()
    if rank0:
        rank0.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

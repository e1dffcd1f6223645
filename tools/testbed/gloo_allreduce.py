#!/usr/bin/python3
"""One rank of a gloo allreduce timing run (torch.distributed), launched once per namespace host.

The default process group comes from the torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), e.g. the lines of phub-probe's rankmap.env. For every order in --orders (name -> host
addresses in rank order) an extra gloo group is built over the same store, with this host's rank in that
order, so all orders are measured by the same processes on the same topology, interleaved rep by rep.
Rank 0 of the default group writes {order: [seconds per rep]} to --out.
"""
import time

_T0 = time.time()  # before importing torch: set-up time includes the import

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist


def order_groups(store, orders, self_addr, world, iface, timeout):
    """One gloo group per order ({name: [addr, ...] in rank order}) over the default group's store, this host
    ranked by its address's place in each order: {name: group}."""
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = [dist.ProcessGroupGloo.create_device(interface=iface)]
    opts._timeout = timeout
    groups = {}
    for name, addrs in orders.items():
        assert len(addrs) == world and self_addr in addrs, name
        groups[name] = dist.ProcessGroupGloo(dist.PrefixStore("order-" + name, store), addrs.index(self_addr), world, opts)
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", required=True, help="JSON file {name: [addr, ...]}")
    ap.add_argument("--self", dest="self_addr", required=True)
    ap.add_argument("--elems", type=int, default=1 << 19)
    ap.add_argument("--iters", type=int, default=2, help="allreduces per timed rep")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--iface", default="eth0")
    a = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=120)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0, timeout)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", a.iface)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    with open(a.orders) as f:
        orders = json.load(f)
    groups = order_groups(store, orders, a.self_addr, world, a.iface, timeout)

    setup_s = time.time() - _T0
    t = torch.empty(a.elems, dtype=torch.float32)
    expected = world * (world + 1) / 2
    times = {name: [] for name in orders}
    for rep in range(a.reps + 1):  # rep 0 warms up connections and buffers
        for name, pg in groups.items():
            my_rank = orders[name].index(a.self_addr)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                t.fill_(my_rank + 1)
                pg.allreduce([t]).wait()
                if t[0].item() != expected or t[-1].item() != expected:
                    raise SystemExit("rank %d order %s: wrong allreduce result %f" % (rank, name, t[0].item()))
            slowest = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if rep > 0:
                times[name].append(slowest.item() / a.iters)
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump({"elems": a.elems, "iters": a.iters, "world": world, "setup_s": setup_s,
                       "seconds_per_allreduce": times}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

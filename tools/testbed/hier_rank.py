#!/usr/bin/python3
"""One rank of tools/bench/hier, launched once per testbed host with the torchrun-style variables of
phub-probe's rankmap.env (RANK is the rank the probe planned for this host), and PHUB_SECRET, the phub jobs'
secret (the environment, not the command line, which ps shows).

Legs, all timed by the same processes on the same tensor, interleaved rep by rep (rep 0 warms up):
  flat          phub.Client.allreduce against one phub-server (--flat-server)
  hier          phub.Client.allreduce against this host's rack hub (--rack-server), as a worker of a flat
                server would: the hubs do the rest
  gloo_<order>  a gloo ring allreduce per order of --orders ({name: [addr, ...] in rank order})
A rep: barrier; rank 0 reads the core's interface counters (testbed.core_counters, by the core namespace's
name) and /proc/stat; every rank runs --iters allreduces of the fp32 tensor, each checked; the slowest rank's
time is agreed on by a MAX allreduce; rank 0 reads the counters and /proc/stat again. Rank 0 writes
{"legs": {leg: {"seconds": [per allreduce], "core_rx_bytes": [per allreduce], "cpu_idle_share": [...],
"bench_cpu_share": [...]}}} to --out. CPU shares are of all CPUs' time over the rep: idle (whoever else runs),
and what the testbed's own processes used. The barrier and the MAX allreduce (a few hundred bytes) are inside
the counted bytes.
"""
import time

_T0 = time.time()  # set-up time includes importing torch

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402
from gloo_allreduce import order_groups  # noqa: E402


def cpu_ticks():
    """(idle + iowait, total) jiffies of all CPUs together, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    return fields[3] + fields[4], sum(fields)


def bench_cpu_ticks(prefix):
    """User + system jiffies of every process in the testbed's namespaces (<prefix>-*): the ranks, the servers,
    the delay lines. Packet forwarding in softirq is not in it."""
    inodes = [os.stat("/run/netns/" + n).st_ino for n in os.listdir("/run/netns") if n.startswith(prefix + "-")]
    ticks = 0
    for pid in testbed.processes_in(inodes):
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        except (OSError, IndexError, ValueError):
            pass  # a process that just ended
    return ticks


def core_rx_bytes(core_ns, racks):
    """Bytes that entered the core from every rack: each cross-rack frame enters it exactly once."""
    return sum(c["rx_bytes"] for c in testbed.core_counters(core_ns, racks).values())


def join(timeout_ms, iface):
    """The default gloo group from the torchrun-style environment, over a TCPStore of its own (the gloo groups
    of other rank orders are built over it too): (rank, world, store, timeout)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(milliseconds=timeout_ms)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0, timeout)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", iface)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    return rank, world, store, timeout


def phub_leg(server, job, port_base, rank, world, tensor, timeout_ms):
    import phub  # only phub legs need the client library
    client = phub.Client.from_env(servers=server, job=job, port_base=port_base, rank=rank, workers=world,
                                  reduce="sum", timeout_ms=timeout_ms)
    client.register(tensor)
    return lambda t: client.allreduce(t, key=0), client


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--legs", required=True, help="comma-separated: flat, hier, gloo_<order>")
    ap.add_argument("--orders", default="", help="JSON file {name: [addr, ...]} for the gloo legs")
    ap.add_argument("--self", dest="self_addr", required=True)
    ap.add_argument("--flat-server", default="")
    ap.add_argument("--flat-job", type=int, default=0)
    ap.add_argument("--flat-port-base", type=int, default=0)
    ap.add_argument("--rack-server", default="")
    ap.add_argument("--hier-job", type=int, default=0)
    ap.add_argument("--hier-port-base", type=int, default=0)
    ap.add_argument("--core-ns", required=True)
    ap.add_argument("--racks", type=int, required=True)
    ap.add_argument("--netns-prefix", required=True, help="the testbed's namespace prefix")
    ap.add_argument("--elems", type=int, required=True)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout-ms", type=int, default=120000)
    ap.add_argument("--out", default="")
    ap.add_argument("--iface", default="eth0")
    a = ap.parse_args()
    torch.set_num_threads(1)

    rank, world, store, timeout = join(a.timeout_ms, a.iface)
    t = torch.empty(a.elems, dtype=torch.float32)
    legs, own_rank, clients = {}, {}, []
    orders = {}
    if a.orders:
        with open(a.orders) as f:
            orders = json.load(f)
    gloo_names = [leg[len("gloo_"):] for leg in a.legs.split(",") if leg.startswith("gloo_")]
    groups = order_groups(store, {n: orders[n] for n in gloo_names}, a.self_addr, world, a.iface, timeout)
    for leg in a.legs.split(","):
        if leg == "flat":
            legs[leg], c = phub_leg(a.flat_server, a.flat_job, a.flat_port_base, rank, world, t, a.timeout_ms)
            clients.append(c)
            own_rank[leg] = rank
        elif leg == "hier":
            legs[leg], c = phub_leg(a.rack_server, a.hier_job, a.hier_port_base, rank, world, t, a.timeout_ms)
            clients.append(c)
            own_rank[leg] = rank
        elif leg.startswith("gloo_"):
            pg = groups[leg[len("gloo_"):]]
            legs[leg] = lambda x, pg=pg: pg.allreduce([x]).wait()
            own_rank[leg] = orders[leg[len("gloo_"):]].index(a.self_addr)
        else:
            raise SystemExit("hier_rank: unknown leg %r" % leg)
    setup_s = time.time() - _T0

    expected = world * (world + 1) / 2
    out = {leg: {"seconds": [], "core_rx_bytes": [], "cpu_idle_share": [], "bench_cpu_share": []} for leg in legs}
    for rep in range(a.reps + 1):
        for leg, allreduce in legs.items():
            dist.barrier()
            if rank == 0:
                bytes0, (idle0, total0) = core_rx_bytes(a.core_ns, a.racks), cpu_ticks()
                own0 = bench_cpu_ticks(a.netns_prefix)
            t0 = time.perf_counter()
            for _ in range(a.iters):
                t.fill_(own_rank[leg] + 1)
                allreduce(t)
                if t[0].item() != expected or t[-1].item() != expected:
                    raise SystemExit("rank %d leg %s: wrong allreduce result %g (want %g)"
                                     % (rank, leg, t[0].item(), expected))
            slowest = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if rank == 0 and rep > 0:
                idle1, total1 = cpu_ticks()
                out[leg]["seconds"].append(slowest.item() / a.iters)
                out[leg]["core_rx_bytes"].append((core_rx_bytes(a.core_ns, a.racks) - bytes0) / a.iters)
                out[leg]["cpu_idle_share"].append((idle1 - idle0) / max(1, total1 - total0))
                out[leg]["bench_cpu_share"].append((bench_cpu_ticks(a.netns_prefix) - own0) / max(1, total1 - total0))
    stats = [c.stats() for c in clients]
    for c in clients:
        c.close()
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump({"elems": a.elems, "iters": a.iters, "world": world, "setup_s": setup_s, "legs": out,
                       "rank0_phub_stats": stats}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""The datacenter the questions of docs/scale.md are asked about, built from tools/model's options: workers
split into racks of `hosts_per_rack` (one rack below that), hosts at host_gbps, rack uplinks at
hosts x host / oversubscription, servers and hubs with `server_nics` NICs of server_gbps and `server_lcores`
lcores. The answers scan worker counts with the model (systems.py); nothing here is fitted."""
import math

from . import ModelError
from .systems import Cluster, SYSTEMS, comm, servers_at_link_rate, step_s

WORKER_COUNTS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]


def cluster(a, workers, **override):
    """Cluster for `workers` from the parsed options `a` (tools/model), with fields overridden."""
    racks = max(1, workers // a.hosts_per_rack)  # Cluster refuses a count that does not split evenly
    fields = dict(workers=workers, racks=racks, host_gbps=a.host_gbps, oversubscription=a.oversubscription,
                  rtt_s=a.rtt_us * 1e-6, cross_rack_rtt_s=a.cross_rack_rtt_us * 1e-6, model_bytes=a.model_mb * 1e6,
                  compute_s=a.compute_ms * 1e-3, overlap=a.overlap, server_gbps=a.server_gbps,
                  server_nics=a.server_nics, server_lcores=a.server_lcores, shards=0, ip_mtu=a.ip_mtu)
    fields.update(override)
    if fields["shards"] == 0:  # the sharded PS gets as many servers as the worker links need
        checked = Cluster(**dict(fields, shards=1))  # refuses a rate the division below cannot use (0, nan, inf)
        fields["shards"] = max(1, math.ceil(workers * checked.host_gbps /
                                            (checked.server_gbps * checked.server_nics) - 1e-9))
    return Cluster(**fields)


def hubs_at_link_rate(a, workers, cost):
    """cluster(a, workers) with each server (hub) given the NICs and lcores that one rack's hub needs to keep its
    workers at link rate (servers_at_link_rate), on one machine."""
    c = cluster(a, workers)
    need = servers_at_link_rate(c, cost)["hier_phub"]
    return cluster(a, workers, server_nics=need["nics"] // c.racks, server_lcores=need["lcores"] // c.racks)


def step_table(a, cost, counts=WORKER_COUNTS):
    """{system: [step seconds per worker count]}."""
    return {s: [step_s(cluster(a, w), cost, s) for w in counts] for s in SYSTEMS}


def one_server_limit(a, cost, max_workers=1024):
    """The first worker count at which one flat server (the options' NICs and lcores) is no longer limited by
    the worker links, with the stage that limits it then, and the lcores it needs at the last count it keeps up."""
    last_ok = None
    for w in range(2, max_workers + 1):
        c = cluster(a, w, racks=1)
        stages, _ = comm(c, cost, "flat_ps")
        if max(stages, key=stages.get) != "worker_link":
            return dict(keeps_up_to=last_ok, fails_at=w, stage=max(stages, key=stages.get),
                        slowdown=max(stages.values()) / stages["worker_link"],
                        lcores_needed=servers_at_link_rate(cluster(a, last_ok, racks=1), cost)["ps"]["lcores"]
                        if last_ok else None)
        last_ok = w
    return dict(keeps_up_to=last_ok, fails_at=None, stage=None, slowdown=1.0, lcores_needed=None)


def ring_crossover(a, cost, system, counts=range(4, 1025), **override):
    """The smallest worker count (racks filled as the options say, fields overridden) at which the ring's step is
    shorter than `system`'s by more than rounding, or None. Where compute hides both exchanges they tie."""
    for w in counts:
        try:
            c = cluster(a, w, **override)
        except ModelError:
            continue
        if step_s(c, cost, "ring") < step_s(c, cost, system) * (1 - 1e-9):
            return w
    return None

"""The measured points the model is validated against, each with the cluster the bench built (read from the
bench's JSON, never fitted): tools/bench/ddp (docs/bench/ddp.json) and tools/bench/hier (docs/bench/hier.json).
A bench's points come from its reader in READERS; tools/bench/train (docs/bench/train.json) would add its step
times by a reader of its JSON registered there (its systems map onto the same four: phub allreduce and ps onto flat_ps,
hierarchical onto hier_phub, gloo onto ring in its order) and nothing else changes."""
import json
import statistics

from . import ModelError
from .systems import Cluster, phub_goodput_share


class Point:
    """One measured step: the bench and leg it came from, the model system it is, the cluster, the seconds."""

    def __init__(self, bench, leg, system, cluster, measured_s, links="nominal"):
        self.bench, self.leg, self.system, self.cluster, self.measured_s = bench, leg, system, cluster, measured_s
        self.links = links  # "nominal": the rates the testbed sets; else what the bench measured of a link


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError("cannot read measured points from %s: %s" % (path, e))


def _need(data, path, *keys):
    missing = [k for k in keys if k not in data]
    if missing:
        raise ModelError("%s lacks %s (rerun its bench: older runs did not record them)" % (path, ", ".join(missing)))


def from_ddp(path):
    """tools/bench/ddp: W workers on host links of link_mbit, one server NIC of server_mbit, one flat job; every
    rep an exchange of the whole tensor with no compute. The testbed adds no delay (RTT 0: veth only). The phub
    legs are given twice: with the nominal host rate, and with the host rate at which the bench's UDP blaster
    (raw_udp_bytes_per_s, worker to worker, same run) filled a link, a measurement of the link, not of phub."""
    data = _load(path)
    _need(data, path, "link_mbit", "server_mbit", "mtu", "lcores", "results", "raw_udp_bytes_per_s")
    raw_gbps = data["raw_udp_bytes_per_s"] * 8 / phub_goodput_share(data["mtu"]) / 1e9
    points = []
    for r in data["results"]:
        def at(host_gbps):
            return Cluster(workers=r["workers"], racks=1, host_gbps=host_gbps, oversubscription=1.0, rtt_s=0.0,
                           cross_rack_rtt_s=0.0, model_bytes=r["size"] * 4, compute_s=0.0, overlap=0.0,
                           server_gbps=data["server_mbit"] / 1e3, server_nics=1, server_lcores=data["lcores"],
                           shards=1, ip_mtu=data["mtu"])
        tag = "%gM w%d" % (r["size"] / 1e6, r["workers"])
        for leg, system in (("phub", "flat_ps"), ("gloo", "ring"), ("mpi", "ring")):
            points.append(Point("ddp", "%s %s" % (leg, tag), system, at(data["link_mbit"] / 1e3),
                                statistics.median(r[leg + "_s"])))
        points.append(Point("ddp", "phub %s" % tag, "flat_ps", at(raw_gbps), statistics.median(r["phub_s"]),
                            links="raw UDP %.3f Gbit/s" % raw_gbps))
    return points


def from_hier(path):
    """tools/bench/hier: racks x hosts at access_mbit, uplinks at hosts x access / oversubscription, hubs at
    hub_mbit; one-way delay delays_us[r] on rack r's uplink, so the worst cross-rack RTT is twice the two largest
    delays; the flat server sits on a hub of the first rack."""
    data = _load(path)
    _need(data, path, "access_mbit", "hub_mbit", "racks", "hosts_per_rack", "oversubscription", "delays_us",
          "ip_mtu", "server_lcores", "tensor_bytes", "median")
    delays = sorted(data["delays_us"])[-2:]
    legs = {"hier": ("hier_phub", "planned"), "flat": ("flat_ps", "planned"),
            "gloo_shuffled": ("ring", "shuffled"), "gloo_planned": ("ring", "planned")}
    points = []
    for leg, (system, order) in legs.items():
        if leg not in data["median"]:
            continue
        c = Cluster(workers=data["racks"] * data["hosts_per_rack"], racks=data["racks"],
                    host_gbps=data["access_mbit"] / 1e3, oversubscription=float(data["oversubscription"]),
                    rtt_s=0.0, cross_rack_rtt_s=2 * sum(delays) * 1e-6, model_bytes=data["tensor_bytes"],
                    compute_s=0.0, overlap=0.0, server_gbps=data["hub_mbit"] / 1e3, server_nics=1,
                    server_lcores=data["server_lcores"], shards=1, ip_mtu=data["ip_mtu"], ring_order=order)
        points.append(Point("hier", leg, system, c, data["median"][leg]["seconds"]))
    return points


READERS = {"ddp": from_ddp, "hier": from_hier}

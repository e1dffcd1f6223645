"""The measured points the model is validated against, each with the cluster the bench built (read from the
bench's JSON, never fitted): tools/bench/ddp (docs/bench/ddp.json), tools/bench/hier (docs/bench/hier.json) and
tools/bench/train (docs/bench/train.json). A bench's points come from its reader in READERS."""
import json
import math
import statistics

from . import ModelError
from .systems import Cluster, phub_goodput_share


class Point:
    """One measured step: the bench and leg it came from, the model system it is, the cluster, the seconds."""

    def __init__(self, bench, leg, system, cluster, measured_s, links="nominal", exchange_s=None):
        self.bench, self.leg, self.system, self.cluster, self.measured_s = bench, leg, system, cluster, measured_s
        self.links = links  # "nominal": the rates the testbed sets; else what the bench measured of a link
        self.exchange_s = exchange_s  # the exchange alone, where the bench measured it apart from the step


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


def _number(data, where, key, positive=False):
    """data[key] if it is a number (a whole or decimal JSON number, finite; > 0 where `positive`), else a
    ModelError naming it."""
    v = data[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (positive and v <= 0):
        raise ModelError("%s: %s = %r is not a%s number" % (where, key, v, " positive" if positive else ""))
    return v


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


# tools/bench/train's systems and the model system each is; every one it runs is modelled. phub's hook (an
# allreduce job) and PSOptimizer (a ps job) both push every gradient to a server and wait for its answer: a
# parameter server round, flat or through the rack hubs.
TRAIN_SYSTEMS = {"phub_ar": ("flat_ps", "planned"), "phub_ps": ("flat_ps", "planned"),
                 "hier_ar": ("hier_phub", "planned"), "hier_ps": ("hier_phub", "planned"),
                 "gloo_shuffled": ("ring", "shuffled"), "gloo_planned": ("ring", "planned")}


def from_train(path):
    """tools/bench/train: per shape, racks x hosts_per_rack workers on access links of access_mbit, uplinks of
    uplink_mbit (the racks shape; none on the flat one), servers and hubs on links of hub_mbit with
    server_lcores lcores; one-way delay delays_us[r] on rack r's uplink only, so a flat shape (one rack) has no
    delay and the racks shape's worst cross-rack RTT is twice the two largest delays; the flat server sits on a
    hub of the first rack. The model's bytes are the parameters' fp32 gradients; its compute per step is the
    system's own compute-only step as the bench measured it (`compute_s`: forward, backward and, for DDP, the
    local optimizer step, the median of the slowest rank's). Overlap 0: a 2-3 layer MLP's backward hands its
    gradients to DDP only at its end, and PSOptimizer exchanges after backward by construction (docs/train.md),
    so the model hides nothing; the bench's hidden share is computed from the step time itself and would be a
    fit. Step time: the median of the slowest rank's steps after the first; the exchange alone (`exchange_s`,
    the median of the slowest rank's exchange on the same gradients with no compute) is kept beside it, so that
    the model's exchange can be compared with it too."""
    data = _load(path)
    shapes = data.get("shapes") if isinstance(data, dict) else None
    if not isinstance(shapes, dict) or not shapes:
        raise ModelError("%s has no 'shapes' (is it tools/bench/train's JSON?)" % path)
    points = []
    for name, shape in sorted(shapes.items()):
        where = "%s, shape %s" % (path, name)
        if not isinstance(shape, dict) or not isinstance(shape.get("systems"), dict):
            raise ModelError("%s is not an object with 'systems'" % where)
        _need(shape, where, "racks", "hosts_per_rack", "access_mbit", "hub_mbit", "oversubscription", "delays_us",
              "ip_mtu", "server_lcores", "params")
        num = {k: _number(shape, where, k) for k in ("racks", "hosts_per_rack", "access_mbit", "hub_mbit",
                                                     "oversubscription", "ip_mtu", "server_lcores", "params")}
        if not isinstance(shape["delays_us"], list) or not shape["delays_us"]:
            raise ModelError("%s: delays_us is not a list of one-way delays" % where)
        delays = sorted(_number(shape["delays_us"], where + ", delays_us", i)
                        for i in range(len(shape["delays_us"])))[-2:] if num["racks"] > 1 else []
        unknown = sorted(set(shape["systems"]) - set(TRAIN_SYSTEMS))
        if unknown:
            raise ModelError("%s: system(s) %s not mapped to a model system (known: %s)" % (
                where, ", ".join(unknown), ", ".join(TRAIN_SYSTEMS)))
        for leg in [k for k in TRAIN_SYSTEMS if k in shape["systems"]]:
            system, order = TRAIN_SYSTEMS[leg]
            s, at = shape["systems"][leg], "%s, system %s" % (where, leg)
            if not isinstance(s, dict):
                raise ModelError("%s is not an object" % at)
            _need(s, at, "step_median_s", "compute_s")
            step, compute = _number(s, at, "step_median_s", positive=True), _number(s, at, "compute_s")
            exchange = _number(s, at, "exchange_s", positive=True) if s.get("exchange_s") is not None else None
            c = Cluster(workers=num["racks"] * num["hosts_per_rack"], racks=num["racks"],
                        host_gbps=num["access_mbit"] / 1e3, oversubscription=float(num["oversubscription"]),
                        rtt_s=0.0, cross_rack_rtt_s=2 * sum(delays) * 1e-6, model_bytes=num["params"] * 4,
                        compute_s=compute, overlap=0.0, server_gbps=num["hub_mbit"] / 1e3, server_nics=1,
                        server_lcores=num["server_lcores"], shards=1, ip_mtu=num["ip_mtu"], ring_order=order)
            points.append(Point("train", "%s %s" % (name, leg), system, c, step, exchange_s=exchange))
    return points


READERS = {"ddp": from_ddp, "hier": from_hier, "train": from_train}

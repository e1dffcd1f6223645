"""Step time of one data-parallel training step, per system, and the servers each needs to keep its workers at
link rate. Pure arithmetic: no I/O. Times in seconds, rates in bit/s, sizes in bytes.

Assumptions (docs/scale.md repeats them):
- Links are full duplex; a transfer moves at the rate of its slowest hop; traffic in one direction of a link
  shares it equally. A frame carries `payload_bytes(ip_mtu)` of data under its headers (phub: Ethernet 14 + IP
  20 + UDP 8 + phub 54 bytes; TCP: Ethernet 14 + IP 20 + TCP 32 with timestamps).
- Parameter servers (flat, sharded, hierarchical) stream chunks: pushes, sums and answers overlap, so a round
  takes its busiest stage (a worker link, a server's NICs, its lcores, a rack uplink) plus the latency to fill the
  pipeline (one RTT per level). A server lcore spends ServerCost.seconds_per_frame per frame (calibration.py) and
  can be 100 % busy.
- The ring allreduce (gloo/NCCL style) has 2(W-1) synchronous steps, each moving M/W over every ring edge; a step
  costs the slowest edge's share of bytes plus its one-way latency. In a rack-grouped ("planned") order one ring
  edge leaves each rack; in a "shuffled" order every edge crosses the core, hosts_per_rack of them per uplink.
  Per-step software cost (reduction, syscalls) is not modelled.
- Compute overlaps communication: a step is compute + comm - hidden, where hidden = min(comm, overlap x compute)
  and `overlap` is the share of compute that communication can run under (DDP overlaps backward, which is about
  two thirds of a step's compute; forward and the optimizer are not overlapped)."""
import math

from . import ModelError

PHUB_HEADER_BYTES = 14 + 20 + 8 + 54  # Ethernet, IPv4, UDP, phub header (docs/protocol.md)
PHUB_IP_OVERHEAD_BYTES = 20 + 8 + 54  # what an IP packet carries besides the payload
TCP_HEADER_BYTES = 14 + 20 + 32
TCP_IP_OVERHEAD_BYTES = 20 + 32
ELEMENT_BYTES = 4  # fp32
SYSTEMS = ["ring", "flat_ps", "sharded_ps", "hier_phub"]
RING_ORDERS = ("planned", "shuffled")
LIMITS = dict(workers=(2, 1024), racks=(1, 64), host_gbps=(0.001, 100.0), ip_mtu=(576, 9216))


class Cluster:
    """The inputs of one prediction. `host_gbps` is each worker's link; `uplink` of a rack is
    hosts_per_rack x host_gbps / oversubscription. Servers: `server_gbps` per NIC, `server_nics` NICs and
    `server_lcores` lcores per server (flat and sharded PS and every hub alike); `shards` servers for the sharded
    PS; one hub per rack for hierarchical phub. RTTs: within a rack, and the largest between two racks."""

    def __init__(self, workers, racks, host_gbps, oversubscription, rtt_s, cross_rack_rtt_s, model_bytes,
                 compute_s, overlap, server_gbps, server_nics, server_lcores, shards, ip_mtu=9000,
                 ring_order="planned"):
        self.workers, self.racks, self.host_gbps, self.oversubscription = workers, racks, host_gbps, oversubscription
        self.rtt_s, self.cross_rack_rtt_s, self.model_bytes, self.compute_s = rtt_s, cross_rack_rtt_s, model_bytes, compute_s
        self.overlap, self.server_gbps, self.server_nics, self.server_lcores = overlap, server_gbps, server_nics, server_lcores
        self.shards, self.ip_mtu, self.ring_order = shards, ip_mtu, ring_order
        self._validate()

    def _validate(self):
        for name in ("workers", "racks", "server_nics", "server_lcores", "shards", "ip_mtu"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ModelError("%s must be a whole number, not %r" % (name, v))
        for name in ("host_gbps", "oversubscription", "rtt_s", "cross_rack_rtt_s", "model_bytes", "compute_s",
                     "overlap", "server_gbps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ModelError("%s must be a finite number, not %r" % (name, v))
        for name, (lo, hi) in LIMITS.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ModelError("%s = %g is outside the model's range [%g, %g]" % (name, v, lo, hi))
        if self.workers % self.racks:
            raise ModelError("workers (%d) must split evenly over racks (%d)" % (self.workers, self.racks))
        if self.oversubscription < 1:
            raise ModelError("oversubscription must be at least 1 (1 = no oversubscription), not %g" % self.oversubscription)
        if self.rtt_s < 0 or self.cross_rack_rtt_s < 0 or self.compute_s < 0:
            raise ModelError("RTTs and compute time cannot be negative")
        if self.model_bytes < ELEMENT_BYTES:
            raise ModelError("model_bytes must be at least one fp32 element, not %g" % self.model_bytes)
        if not 0 <= self.overlap <= 1:
            raise ModelError("overlap is a share of compute, in [0, 1], not %g" % self.overlap)
        if self.server_gbps <= 0 or self.server_nics < 1 or self.server_lcores < 1 or self.shards < 1:
            raise ModelError("a server needs a positive NIC rate and at least one NIC, lcore and shard")
        if self.ring_order not in RING_ORDERS:
            raise ModelError("ring_order must be one of %s, not %r" % (", ".join(RING_ORDERS), self.ring_order))

    @property
    def hosts_per_rack(self):
        return self.workers // self.racks

    def uplink_bps(self):
        return self.hosts_per_rack * self.host_gbps * 1e9 / self.oversubscription

    def worst_rtt_s(self):
        return self.cross_rack_rtt_s if self.racks > 1 else self.rtt_s


def phub_payload_bytes(ip_mtu):
    """fp32 payload bytes of one full phub frame."""
    return (ip_mtu - PHUB_IP_OVERHEAD_BYTES) // ELEMENT_BYTES * ELEMENT_BYTES


def phub_goodput_share(ip_mtu):
    p = phub_payload_bytes(ip_mtu)
    return p / (p + PHUB_HEADER_BYTES)


def tcp_goodput_share(ip_mtu):
    p = ip_mtu - TCP_IP_OVERHEAD_BYTES
    return p / (p + TCP_HEADER_BYTES)


def overlapped_step_s(compute_s, comm_s, overlap):
    """compute + comm, less the communication hidden under the overlappable share of compute."""
    return compute_s + comm_s - min(comm_s, overlap * compute_s)


def ring_comm(c):
    """{stage: seconds} of a ring allreduce of the model over the workers, and its total."""
    w, rate = c.workers, c.host_gbps * 1e9
    if c.racks > 1:
        flows = 1 if c.ring_order == "planned" else c.hosts_per_rack
        rate = min(rate, c.uplink_bps() / flows)
    bytes_per_edge = 2 * (w - 1) / w * c.model_bytes
    stages = {"edge_bytes": bytes_per_edge * 8 / (rate * tcp_goodput_share(c.ip_mtu)),
              "latency": 2 * (w - 1) * c.worst_rtt_s() / 2}
    return stages, stages["edge_bytes"] + stages["latency"]


def _servers_per_rack(servers, racks):
    """Servers spread round-robin over racks, rack 0 first."""
    return [servers // racks + (1 if r < servers % racks else 0) for r in range(racks)]


def ps_comm(c, cost, servers):
    """{stage: seconds} of a parameter server round over `servers` servers (the model split evenly, servers
    spread over the racks), and the total: the busiest stage plus one RTT to fill the pipeline."""
    m, w, n = c.model_bytes, c.workers, c.hosts_per_rack
    share = phub_goodput_share(c.ip_mtu)
    payload = phub_payload_bytes(c.ip_mtu)
    server_bytes = w * m / servers
    stages = {"worker_link": m * 8 / (c.host_gbps * 1e9 * share),
              "server_nics": server_bytes * 8 / (c.server_nics * c.server_gbps * 1e9 * share),
              "server_lcores": math.ceil(server_bytes / payload) * cost.seconds_per_frame(payload) / c.server_lcores}
    if c.racks > 1:
        worst = 0.0
        for s_r in _servers_per_rack(servers, c.racks):
            out_bytes = n * m * (1 - s_r / servers)  # this rack's workers to servers elsewhere (and answers back)
            in_bytes = (w - n) * m * s_r / servers  # other racks' workers to this rack's servers
            worst = max(worst, out_bytes, in_bytes)
        stages["uplink"] = worst * 8 / (c.uplink_bps() * share)
    return stages, max(stages.values()) + c.worst_rtt_s()


def hier_comm(c, cost):
    """{stage: seconds} of hierarchical phub (one hub per rack, chunk homes spread over the hubs), and the total:
    the busiest stage plus an RTT within the rack and one across the core."""
    m, n, r = c.model_bytes, c.hosts_per_rack, c.racks
    share = phub_goodput_share(c.ip_mtu)
    payload = phub_payload_bytes(c.ip_mtu)
    cross = 2 * (r - 1) / r * m  # partials out + results out for chunks homed elsewhere / here, each direction
    hub_bytes = n * m + cross
    stages = {"worker_link": m * 8 / (c.host_gbps * 1e9 * share),
              "hub_nics": hub_bytes * 8 / (c.server_nics * c.server_gbps * 1e9 * share),
              "hub_lcores": math.ceil(hub_bytes / payload) * cost.seconds_per_frame(payload) / c.server_lcores}
    latency = c.rtt_s
    if r > 1:
        stages["uplink"] = cross * 8 / (c.uplink_bps() * share)
        latency += c.cross_rack_rtt_s
    return stages, max(stages.values()) + latency


def comm(c, cost, system):
    """(stages, comm seconds) of one system."""
    if system == "ring":
        return ring_comm(c)
    if system == "flat_ps":
        return ps_comm(c, cost, 1)
    if system == "sharded_ps":
        return ps_comm(c, cost, c.shards)
    if system == "hier_phub":
        return hier_comm(c, cost)
    raise ModelError("unknown system %r (one of %s)" % (system, ", ".join(SYSTEMS)))


def step_s(c, cost, system):
    """Seconds per training step of `system` on cluster `c`, with compute overlapped as the module says."""
    return overlapped_step_s(c.compute_s, comm(c, cost, system)[1], c.overlap)


def bottleneck(c, cost, system):
    stages, _ = comm(c, cost, system)
    return max(stages, key=stages.get)


def servers_at_link_rate(c, cost):
    """What keeps every worker link the bottleneck: {system: {"nics", "lcores", "servers"}}, where a server has
    c.server_nics NICs of c.server_gbps. flat/sharded PS: one pool taking W host links in; hier: per rack the hub
    takes its n host links plus 2(R-1)/R of a host link from the other hubs, times R racks. Also whether the
    rack uplinks keep up with hierarchical phub's cross-rack share (`uplink_ok`)."""
    host = c.host_gbps * 1e9
    payload = phub_payload_bytes(c.ip_mtu)
    lcore_bps = cost.lcore_bytes_per_s(payload) * 8 / phub_goodput_share(c.ip_mtu)  # wire bit/s per lcore
    need = {}
    flat_in = c.workers * host
    nics = math.ceil(flat_in / (c.server_gbps * 1e9) - 1e-9)
    need["ps"] = dict(nics=nics, lcores=math.ceil(flat_in / lcore_bps - 1e-9),
                      servers=math.ceil(nics / c.server_nics))
    r, n = c.racks, c.hosts_per_rack
    hub_in = (n + 2 * (r - 1) / r) * host
    hub_nics = math.ceil(hub_in / (c.server_gbps * 1e9) - 1e-9)
    need["hier_phub"] = dict(nics=r * hub_nics, lcores=r * math.ceil(hub_in / lcore_bps - 1e-9),
                             servers=r * math.ceil(hub_nics / c.server_nics),
                             uplink_ok=r == 1 or c.uplink_bps() >= 2 * (r - 1) / r * host)
    return need

"""dpdk-testpmd as the same-run reference: io forwarding, txonly and rxonly over net_memif."""
import re
import statistics

from . import procs

TESTPMD = "/usr/bin/dpdk-testpmd"


def argv(mode, *, prefix, device, cpu, frame_bytes=None, jumbo=False, ctl_cpu=0):
    """testpmd with one forwarding lcore on CPU `cpu`, one port, stats every second. Its control lcore goes
    on CPU `ctl_cpu`, by default 0 (the generator's side): as a sink or forwarder on CPU 1 it is what is
    measured, as a source on CPU 0 it is the generator. A sink whose per-second counts are the measurement
    keeps its control lcore on its own CPU (ctl_cpu=1), so that a busy generator does not delay them. The
    default pools do not fit -m 512, hence --total-num-mbufs (8192 per port).
    Several ports: `device` a list of vdevs (ports 0, 1, ... in that order) and `cpu` a list with one CPU per
    forwarding lcore (--nb-cores); with --port-topology=loop each port forwards back to itself, and testpmd
    gives each forwarding lcore its share of the ports' streams (one port each where there are as many)."""
    devices = list(device) if isinstance(device, (list, tuple)) else [device]
    cpus = list(cpu) if isinstance(cpu, (list, tuple)) else [cpu]
    a = [TESTPMD, "--no-huge", "--no-pci", "-m", "512", "--file-prefix", prefix, "--lcores",
         ",".join(["0@%d" % ctl_cpu] + ["%d@%d" % (i + 1, c) for i, c in enumerate(cpus)])]
    for d in devices:
        a += ["--vdev", d]
    a += ["--log-level", "lib.eal:warning", "--",
          "--total-num-mbufs=%d" % (8192 * len(devices)), "--forward-mode=%s" % mode, "--port-topology=loop",
          "--stats-period", "1", "--burst=32", "--rxd=1024", "--txd=1024"]
    if len(cpus) > 1:
        a += ["--nb-cores=%d" % len(cpus)]
    if jumbo:  # memif advertises a 1518-byte maximum frame but carries whatever fits its buffers: only the
        a += ["--mbuf-size=10240"]  # mbufs grow, so that a frame lands in one
    if frame_bytes:
        a += ["--txpkts=%d" % frame_bytes]
    return a


def start(mode, cleanup, **kw):
    """Start testpmd and return once its port is started (a memif peer can connect from then on)."""
    p = cleanup.add(procs.Proc(argv(mode, **kw), "dpdk-testpmd-" + mode), kw["prefix"])
    if not p.wait_for("Checking link statuses", 60):
        raise RuntimeError("dpdk-testpmd did not start its port:\n" + p.stdout()[-2000:] + p.stderr()[-2000:])
    return p


def rates(text, key):
    """Per-second `key` values (e.g. 'Rx-pps', 'Tx-pps') from testpmd's periodic stats."""
    return [int(v) for v in re.findall(r"%s:\s+(\d+)" % key, text)]


def steady(values):
    """The steady-state rate of a series of per-second rates: the median of the non-zero ones without the
    first and the last (partial seconds while the peer starts and stops), when there are enough."""
    nonzero = [v for v in values if v > 0]
    if len(nonzero) >= 4:
        nonzero = nonzero[1:-1]
    elif len(nonzero) == 3:
        nonzero = nonzero[1:]
    return statistics.median(nonzero) if nonzero else 0

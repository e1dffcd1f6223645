"""The model's figures (matplotlib through phubbench.plot): step time against workers per system, and the
NICs, lcores and hub machines each server-based system needs to keep its workers at link rate. Each names the
command that made it."""
import os

from phubbench import plot

from . import scenarios
from .systems import SYSTEMS, servers_at_link_rate, step_s


def make(a, cost, out_dir, command):
    counts = scenarios.WORKER_COUNTS
    note = "%s  (model: %g Gbit/s hosts, %g:1, %g MB, %g ms compute, overlap %.2f)" % (
        command, a.host_gbps, a.oversubscription, a.model_mb, a.compute_ms, a.overlap)
    steps = scenarios.step_table(a, cost, counts)
    need = [servers_at_link_rate(scenarios.cluster(a, w), cost) for w in counts]
    sized = [step_s(scenarios.hubs_at_link_rate(a, w, cost), cost, "hier_phub") for w in counts]
    series = [(s, [t * 1e3 for t in steps[s]]) for s in SYSTEMS] + [
        ("hier_phub, hubs as servers.png", [t * 1e3 for t in sized])]
    step_png = plot.lines(os.path.join(out_dir, "step_time.png"), "Predicted step time (tools/model)", "workers",
                          "step time (ms, log)", counts, series, logx=True, logy=True, note=note)
    series = [("PS NICs (%g Gbit/s)" % a.server_gbps, [n["ps"]["nics"] for n in need]),
              ("PS lcores", [n["ps"]["lcores"] for n in need]),
              ("hier NICs", [n["hier_phub"]["nics"] for n in need]),
              ("hier lcores", [n["hier_phub"]["lcores"] for n in need]),
              ("hier hubs (%d NIC each)" % a.server_nics, [n["hier_phub"]["servers"] for n in need])]
    servers_png = plot.lines(os.path.join(out_dir, "servers.png"), "Servers needed to keep workers at link rate",
                             "workers", "count (log)", counts, series, logx=True, logy=True, note=note)
    return [step_png, servers_png]

"""The phub server's processing cost, read from the benches' JSON (never typed in).

tools/bench/pktgen's MTU sweep (docs/bench/pktgen.json, "mtu") holds, per MTU, the server's busy cycles per
packet (`server_busy_cycles_per_packet`), its pushes per second, its busy share (`server_busy_percent`) and its
counters (pushes, push_payload_bytes). From the two MTUs:
  cycles per push = cycles_per_frame + cycles_per_byte x payload bytes of the push (a line through both points);
  TSC rate = busy cycles per packet x pushes per second / busy share (what the busy share was measured against),
unless the JSON gives `tsc_hz` itself (tools/bench/server reports it per lcore since ceb98d0; the committed
docs/bench/server.json predates that), in which case that is used. A push's cycles cover its receipt, summing and
the answer it triggers (the bench answers every push), so they are the server's whole cost per frame."""
import json
import statistics

from . import ModelError


class ServerCost:
    """Cycles an lcore spends per frame of `payload` bytes, and the TSC rate they are counted at."""

    def __init__(self, cycles_per_frame, cycles_per_byte, tsc_hz, source):
        if not (cycles_per_frame >= 0 and cycles_per_byte > 0 and tsc_hz > 0):
            raise ModelError("server cost from %s is not usable: %.1f cycles per frame, %.4f per byte, TSC %.3g Hz"
                             % (source, cycles_per_frame, cycles_per_byte, tsc_hz))
        self.cycles_per_frame, self.cycles_per_byte, self.tsc_hz, self.source = (
            cycles_per_frame, cycles_per_byte, tsc_hz, source)

    def seconds_per_frame(self, payload_bytes):
        return (self.cycles_per_frame + self.cycles_per_byte * payload_bytes) / self.tsc_hz

    def lcore_bytes_per_s(self, payload_bytes):
        """Payload bytes one fully busy lcore sums and answers per second, in frames of `payload_bytes`."""
        return payload_bytes / self.seconds_per_frame(payload_bytes)

    def describe(self):
        return ("%.0f cycles per frame + %.3f per payload byte at TSC %.3f GHz (from %s)"
                % (self.cycles_per_frame, self.cycles_per_byte, self.tsc_hz / 1e9, self.source))


def _mtu_point(entry, where):
    """(payload bytes per push, busy cycles per push, TSC Hz) of one MTU of pktgen's sweep."""
    runs = entry.get("server_runs") or [entry.get("server")]
    payload, cycles, tsc = [], [], []
    for r in runs:
        try:
            pushes = r["server_counters"]["pushes"]
            payload.append(r["server_counters"]["push_payload_bytes"] / pushes)
            cycles.append(r["server_busy_cycles_per_packet"])
            busy = statistics.mean(r["server_busy_percent"]) / 100.0
            tsc.append(r["tsc_hz"] if "tsc_hz" in r else r["server_busy_cycles_per_packet"] * r["pushes_pps"] / busy)
        except (KeyError, TypeError, ZeroDivisionError) as e:
            raise ModelError("%s: MTU %s has no usable server run (%s missing or zero)" % (where, entry.get("mtu"), e))
    return statistics.median(payload), statistics.median(cycles), statistics.median(tsc)


def from_pktgen(path):
    """ServerCost from tools/bench/pktgen's JSON (its per-MTU runs)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError("cannot read the server's cycles from %s: %s" % (path, e))
    points = sorted(_mtu_point(e, path) for e in data.get("mtu", []))
    if len(points) < 2 or points[0][0] == points[-1][0]:
        raise ModelError("%s: needs server runs at two MTUs (its 'mtu' list has %d)" % (path, len(points)))
    (p0, c0, t0), (p1, c1, t1) = points[0], points[-1]
    per_byte = (c1 - c0) / (p1 - p0)
    return ServerCost(c0 - per_byte * p0, per_byte, statistics.mean([t0, t1]),
                      "%s: MTUs %s" % (path, "/".join(str(e["mtu"]) for e in data["mtu"])))


def server_bench_cycles(path):
    """tools/bench/server's busy cycles per packet (median over its runs) and the frame size, to print beside
    the pktgen calibration as a cross-check (its transport and frame differ: memif, 1500-byte frames)."""
    try:
        with open(path) as f:
            data = json.load(f)
        runs = data["server_runs"]
        return statistics.median(r["server_busy_cycles_per_packet"] for r in runs), data["config"]["frame_bytes"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelError("cannot read cycles per packet from %s: %s" % (path, e))

#!/usr/bin/python3
"""The Wireshark dissector (tools/wireshark/phub.lua) under Debian's tshark, offline: (1) a sample of every opcode
built here from docs/protocol.md decodes with no problem and with the field values it was built with; (2) each
malformed frame of a sample (wrong length, bad magic, unknown opcode, bad flags, ...) is decoded with its
expert error and without a Lua error; (3) a trace written by `phub-pktgen --write-pcap` (an allreduce bf16 job and
a ps fp32 job) decodes frame by frame with no problem, and tshark's opcode counts equal the counts phub-pktgen
recorded while writing it. No EAL, no root. Usage: pcap_test.py --pktgen PATH."""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "bench", "lib"))
import frames  # noqa: E402
import tshark  # noqa: E402
from phubbench import pktgen, server  # noqa: E402
from phubbench.testing import Checks  # noqa: E402

ROUNDS = 3


def spec_sample(t, d):
    sample = frames.well_formed()
    path = os.path.join(d, "sample.pcap")
    frames.write_pcap(path, [frames.udp_frame(p) for _, p, _ in sample])
    rc, err, pkts = tshark.packets(path)
    if not t.check("sample: tshark exits 0 with %d packets" % len(sample), rc == 0 and len(pkts) == len(sample),
                   "exit %d, %d packets: %s" % (rc, len(pkts), err[-500:])):
        return
    for (what, _, want), p in zip(sample, pkts):
        wrong = {k: p.fields.get(k) for k, v in want.items() if v not in p.fields.get(k, [])}
        t.check("sample %d %s: no problem, fields %s" % (p.number, what, ",".join(sorted(want))),
                not p.problems() and not wrong, "problems %s; fields %s" % (p.problems(), wrong))
    seen = set(p.opcode() for p in pkts)
    t.check("sample: every opcode of the protocol decoded", seen >= set(tshark.OPCODE_NAMES.values()),
            "missing %s" % sorted(set(tshark.OPCODE_NAMES.values()) - seen))


def snapped_sample(t, d):
    """The well-formed sample captured with short snap lengths: cut frames are not malformed phub."""
    sample = frames.well_formed()
    for snaplen in (128, 64):  # the payloads cut; the phub header cut too
        path = os.path.join(d, "snap%d.pcap" % snaplen)
        frames.write_pcap(path, [frames.udp_frame(p) for _, p, _ in sample], snaplen)
        rc, err, pkts = tshark.packets(path)
        phub_pkts = [p for p in pkts if "phub" in p.protos]
        t.check("snap length %d: %d frames, each phub, none malformed, no Lua error" % (snaplen, len(sample)),
                rc == 0 and len(pkts) == len(sample) and len(phub_pkts) == len(sample) and
                not any(p.problems() for p in pkts), "exit %d: %s %s" % (rc, err[-300:], [
                    (p.number, p.problems()) for p in pkts if p.problems()][:3]))


def malformed_sample(t, d):
    sample = frames.malformed()
    path = os.path.join(d, "malformed.pcap")
    frames.write_pcap(path, [frames.udp_frame(p) for _, p, _ in sample])
    # The bad-magic frame is claimed only through the port preference (the heuristic wants the magic).
    rc, err, pkts = tshark.packets(path, ["-o", "phub.ports:%d" % frames.PORT])
    if not t.check("malformed: tshark exits 0 with %d packets, no Lua error" % len(sample),
                   rc == 0 and len(pkts) == len(sample) and not any("_ws.lua.error" in p.fields for p in pkts),
                   "exit %d, %d packets: %s" % (rc, len(pkts), err[-500:])):
        return
    for (what, _, expert), p in zip(sample, pkts):
        got = [e for e in p.experts if e[0] == expert and e[1] >= tshark.SEVERITY_WARN]
        t.check("malformed %d %s: expert error %s" % (p.number, what, expert), bool(got),
                "experts %s" % p.experts)


def pktgen_trace(t, d, exe):
    cfg, trace = os.path.join(d, "server.lua"), os.path.join(d, "trace.pcap")
    jobs = [server.job(1, "ws-bf16", 3, 5000, dtype="bf16", reduce="mean", secret="wireshark-trace-1"),
            server.job(2, "ws-ps", 2, 3000, mode="ps", optimizer={"kind": "adam", "lr": 0.01})]
    server.config(cfg, prefix="phubs-ws-%d" % os.getpid(), device="net_null0", jobs=jobs)
    status, w, err = pktgen.offline(exe, ["--server-config", cfg, "--write-pcap", trace, "--pcap-rounds", str(ROUNDS)])
    if not t.check("pktgen wrote a %d-round trace with its opcode counts" % ROUNDS,
                   status == 0 and w is not None and w.get("opcodes"), "exit %s: %s" % (status, err[-500:])):
        return
    rc, err, pkts = tshark.packets(trace)
    t.check("trace: tshark exits 0 and shows all %d frames pktgen wrote" % w["frames"],
            rc == 0 and len(pkts) == w["frames"], "exit %d, %d packets: %s" % (rc, len(pkts), err[-500:]))
    bad = [(p.number, p.problems()) for p in pkts if p.problems()]
    t.check("trace: every frame decoded as phub with no malformed field or expert error", pkts and not bad,
            "%d bad, first %s" % (len(bad), bad[:3]))
    counts = tshark.opcode_counts(pkts)
    names = sorted(set(counts) | set(w["opcodes"]))
    print("    %-14s %8s %8s" % ("opcode", "tshark", "pktgen"))
    for n in names:
        print("    %-14s %8s %8s" % (n, counts.get(n, 0), int(w["opcodes"].get(n, 0))))
    t.check("trace: tshark's opcode counts equal pktgen's (%s)" % counts,
            counts == {k: int(v) for k, v in w["opcodes"].items()}, "pktgen %s" % w["opcodes"])
    # The record's own arithmetic agrees: every rank pushes every segment each round, rank 0 inits each once.
    pushes = sum(int(e["pushes"]) for e in w["expect"])
    inits = sum(int(e["inits"]) for e in w["expect"])
    t.check("trace: the counts are the expected pushes (%d) and inits (%d)" % (pushes, inits),
            counts.get("push") == pushes and counts.get("init") == inits and inits > 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pktgen", required=True)
    a = ap.parse_args()
    t = Checks("wireshark dissector, offline")
    why = tshark.available()
    if not t.check("tshark and the dissector are there", why is None, why or ""):
        return t.done()
    if not t.check("phub-pktgen is built (%s)" % a.pktgen, os.access(a.pktgen, os.X_OK)):
        return t.done()
    with tempfile.TemporaryDirectory(prefix="phub-wireshark-") as d:
        spec_sample(t, d)
        snapped_sample(t, d)
        malformed_sample(t, d)
        pktgen_trace(t, d, a.pktgen)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The Wireshark dissector (tools/wireshark/phub.lua) on a capture of live traffic with sessions: two racks of the
testbed (tools/testbed), a real phub-server per rack hub (af_packet), one phub-demo-worker per rack (kernel UDP),
a hierarchical ps job with a secret (sessions on, the default, and payload_mac = true). tcpdump captures hub 1's
link on its rack router from before the hubs start until after both stopped; so the capture holds exactly what
hub 1 received and sent: its workers' joins, pushes and inits, its joined, result and error answers, and the hub
opcodes both ways (fwd_partial, fwd_result, fwd_init, hub_state). Checks: tshark decodes every frame as phub with
no malformed field or expert error; the sessions show (every joined says session and payload_mac, the workers'
packets are session packets, pushes and results carry the mac flag); and the opcode counts tshark reports equal
hub 1's own counts of the messages it handled and sent (rx_<opcode>, tx_<opcode> in its final counters).
Root; bounded; everything removed on failure. Usage: live_test.py --build BUILD_DIR."""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hier"))
import hierbed  # noqa: E402
import tshark  # noqa: E402
import tworacks  # noqa: E402
from hierbed import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

ROUNDS = 15
KEYS = [6000, 700]
ADAM = dict(kind="adam", lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8)
HUB_OPCODES = ("fwd_partial", "fwd_result", "fwd_init", "hub_state")


def start_capture(tb, path, log):
    """tcpdump of the UDP frames on hub 1's port of rack 1's bridge, written as they come; waits until it listens."""
    p = tb.popen(tb.ns_rack(1), ["timeout", "150", "tcpdump", "-n", "-U", "-i", "hub1", "-w", path, "udp"],
                 stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    deadline = time.time() + 15
    while time.time() < deadline and "listening on" not in open(log).read():
        if p.poll() is not None:
            break
        time.sleep(0.05)
    if "listening on" not in open(log).read():
        raise RuntimeError("tcpdump did not start: " + open(log).read()[-500:])
    return p


def hub_messages(counters):
    """{opcode: n} hub 1 counted: the messages it handled plus those its port took, over its lcores."""
    out = {}
    for key, values in counters.items():
        if not key.startswith("lcore "):
            continue
        for name, n in values.items():
            for prefix in ("rx_", "tx_"):
                op = name[len(prefix):]
                if name.startswith(prefix) and op in tshark.OPCODE_NAMES.values():
                    out[op] = out.get(op, 0) + n
    return out


def run(build, check):
    job = phubnet.job(1, "H", 2, KEYS, 42100, mode="ps", optimizer=ADAM, secret="wireshark-live-test-secret",
                      payload_mac=True, allowed_sources=["198.18.%d.0/24" % r for r in tworacks.RACKS])
    with tworacks.TwoRacks(build, job) as bed:
        try:
            pcap, cap_log = os.path.join(bed.tmp, "hub1.pcap"), os.path.join(bed.tmp, "tcpdump.log")
            cap = start_capture(bed.tb, pcap, cap_log)
            bed.start_hubs()
            results = livenet.finish_workers(bed.start_workers(ROUNDS), 90)
            ok, detail = livenet.workers_ok(results)
            check("both ranks complete %d rounds of the ps job, every result right" % ROUNDS, ok, detail)
            check("the ranks ran sessions with their hubs (sessions %s)" % [s.get("sessions") for _, s, _ in results],
                  all(int(s.get("sessions", 0)) > 0 for _, s, _ in results))
            # Hub 2 first: whatever it sent reached hub 1 while hub 1 ran; then hub 1, then the capture.
            for r in (2, 1):
                check("hub %d stops on SIGINT with exit 0" % r, bed.stop_hub(r) == 0)
            time.sleep(0.5)
            cap.send_signal(signal.SIGINT)
            cap.wait(timeout=20)
            capture_log = open(cap_log).read()
            print("    tcpdump: %s" % " ".join(capture_log.split("\n")[-4:]).strip(), flush=True)
            check("tcpdump lost nothing", "0 packets dropped by kernel" in capture_log, capture_log[-300:])
            compare(check, pcap, hub_messages(bed.counters(1)))
        finally:
            if check.failed:
                for r, path in bed.logs.items():
                    if os.path.exists(path):
                        print("hub %d log tail:\n%s" % (r, open(path).read()[-2000:]), flush=True)
    leaks = bed.leaks()
    check("nothing left (namespaces, processes, root nftables tables): %s" % leaks, not any(leaks.values()))


def compare(check, pcap, counted):
    rc, err, pkts = tshark.packets(pcap)
    if not check("tshark decodes the capture (%d frames)" % len(pkts), rc == 0 and pkts, "exit %d: %s" % (rc, err[-500:])):
        return
    bad = [(p.number, p.problems()) for p in pkts if p.problems()]
    check("every captured frame decoded as phub with no malformed field or expert error", not bad,
          "%d bad, first %s" % (len(bad), bad[:3]))
    counts = tshark.opcode_counts(pkts)
    print("    %-14s %8s %8s" % ("opcode", "tshark", "hub 1"), flush=True)
    for op in sorted(set(counts) | set(counted)):
        print("    %-14s %8d %8d" % (op, counts.get(op, 0), counted.get(op, 0)), flush=True)
    check("tshark's opcode counts equal hub 1's counts of the messages it handled and sent", counts == counted,
          "tshark %s, hub 1 %s" % (counts, counted))
    check("the capture has the hub opcodes both ways (%s)" % ", ".join(HUB_OPCODES),
          all(counts.get(op, 0) > 0 for op in HUB_OPCODES) and
          all(counts.get(op, 0) > 0 for op in ("join", "joined", "push", "result", "init")), str(counts))
    joined = [p for p in pkts if p.opcode() == "joined"]
    check("every joined says session and payload_mac (%d)" % len(joined), joined and all(
        p.first("phub.handshake.session") == "1" and p.first("phub.handshake.payload_mac") == "1" for p in joined))
    worker_ops = ("push", "result", "init")
    data = [p for p in pkts if p.opcode() in worker_ops]
    check("every push, init and result is a session packet with the mac flag (%d)" % len(data), data and all(
        p.first("phub.session") == "1" and p.first("phub.flags.mac") == "1" and p.first("phub.payload_mac")
        for p in data))
    hub = [p for p in pkts if p.opcode() in HUB_OPCODES]
    check("hub opcodes carry the forward payload MAC and are not session packets (%d)" % len(hub), hub and all(
        p.first("phub.hub_mac") and p.first("phub.session") is None for p in hub))


def main():
    build, check, ready = hierbed.begin()
    if not ready:
        return check.summary()
    why = tshark.available()
    if not check("tshark and the dissector are there", why is None, why or ""):
        return check.summary()
    run(build, check)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The attack suite (issue 16), reflection part: a host on the server's segment that never joins a job sends
one-header requests and spoofable pushes to a live phub-server (af_packet, network namespaces,
tests/system/client/phubnet.py) and counts what comes back to its address, which is what a spoofed victim
would receive. For every attack: what was expected, what was observed, bytes out per byte in (must be at
most 1: the source never proved it receives at its address), and the server's counter that recorded it.
Beside the attacks, job "healthy" runs real phub-demo-worker ranks that verify every element, and must
finish correctly while the attacker moves its rank 1's address.
Usage: attack_test.py --build BUILD_DIR   (root; removes namespaces and processes, also on failure)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

TARGET_KEYS = [352 * 8]  # chunk 0: 8 segments of 352 fp32 (attacker.py assumes it)
JOBS = [phubnet.job(1, "healthy", 2, [30000, 4097], 45100),
        phubnet.job(2, "reflect", 2, TARGET_KEYS, 45200),
        phubnet.job(3, "weights", 1, TARGET_KEYS, 45300, mode="ps", optimizer=dict(kind="sgd", lr=0.1)),
        phubnet.job(4, "stalled", 2, TARGET_KEYS, 45400),
        phubnet.job(5, "signed", 2, TARGET_KEYS, 45500, secret="attack-suite-secret-0123456789")]
ARP_ICMP_PER_S, ARP_ICMP_BURST = 1000, 50  # the server's defaults (docs/config.md, limits)
ATTACKER_NS = 2


def attack(net, name, port, job_id, seconds=2.0):
    argv = ["timeout", "60", sys.executable, os.path.join(HERE, "attacker.py"), name, phubnet.SERVER_IP, str(port),
            str(job_id), "--seconds", str(seconds)]
    p = net.popen(ATTACKER_NS, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=90)
    if p.returncode != 0:
        raise RuntimeError("attacker.py %s: exit %d: %s" % (name, p.returncode, err[-500:]))
    return json.loads(out)


def drops(ctl, job, reason):
    time.sleep(0.2)  # a fresh sample (control.metrics_interval_ms 50)
    j = livenet.job_of(ctl.stats(), job)
    return j["drops"].get(reason, 0) if j else 0


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    rows = []
    with phubnet.Net(workers=3, lcores=1, build_dir=build) as net:
        net.start_server(JOBS, round_stall_ms=100, timeout_s=300, settings=dict(control=dict(metrics_interval_ms=50)))
        ctl = livenet.Ctl(net)

        def row(name, expected, got, counter):
            ratio = got["out"] / got["in"] if got["in"] else float("inf")
            rows.append((name, expected, "%d B in, %d B out" % (got["in"], got["out"]), ratio, counter))
            check("%s: bytes out per byte in %.3f <= 1" % (name, ratio), ratio <= 1.0)

        got = attack(net, "rerequest", 45200, 2)
        check("rerequest setup: pushes pay for their results (%d <= %d)" % (got["setup_out"], got["setup_in"]),
              got["setup_out"] <= got["setup_in"])
        n = drops(ctl, "reflect", "unproven_limit")
        row("whole-chunk rerequest x200", "at most the request bytes", got, "unproven_limit %d" % n)
        check("rerequest: the server counted what it held back (unproven_limit %d)" % n, n > 0)

        got = attack(net, "pull", 45300, 3)
        n = drops(ctl, "weights", "unproven_limit")
        row("whole-chunk ps pull x200", "at most the request bytes", got, "unproven_limit %d" % n)
        check("pull: the server counted what it held back (unproven_limit %d)" % n, n > 0)

        got = attack(net, "stall", 45400, 4, seconds=3.0)
        n = drops(ctl, "stalled", "unproven_limit")
        row("one push, round left stalled 3 s", "stall reports end with the push's bytes", got,
            "unproven_limit %d" % n)
        check("stall: the contributor was told its round stalled (%d B)" % got["out"], got["out"] > 0)

        got = attack(net, "forged", 45500, 5)
        n = drops(ctl, "signed", "bad_tag")
        row("200 pushes/rerequests without the secret", "nothing answered, each counted", got, "bad_tag %d" % n)
        check("forged: nothing came back (%d B)" % got["out"], got["out"] == 0)
        check("forged: every packet counted as bad_tag (%d of 200)" % n, n == 200)

        got = attack(net, "ping", 0, 0, seconds=1.0)
        stats = ctl.stats()
        limited = stats["drops"].get("reply_rate_limited", 0)
        bound = ARP_ICMP_BURST + ARP_ICMP_PER_S * (got["seconds"] + 0.5)
        row("ICMP echo flood, %d requests in 1 s" % got["requests"], "replies within the token bucket", got,
            "reply_rate_limited %d" % limited)
        check("ping: %d replies within the bucket (%d + %d/s)" % (got["replies"], ARP_ICMP_BURST, ARP_ICMP_PER_S),
              0 < got["replies"] <= bound)
        check("ping: the refused requests counted (%d)" % limited,
              got["requests"] <= bound or limited > 0)

        healthy = livenet.start_workers(net, "healthy", [0, 1], ["--seconds", "4", "--timeout-ms", "20000"],
                                        net.config_path, 60)
        got = attack(net, "hijack", 45100, 1, seconds=3.0)
        results = livenet.finish_workers(healthy, 60)
        ok, detail = livenet.workers_ok(results)
        n = drops(ctl, "healthy", "unproven_limit")
        stats = ctl.stats()
        proven = livenet.job_of(stats, "healthy").get("addresses_proven", 0)
        row("rank 1's address moved by rerequests", "at most the request bytes; the job finishes", got,
            "unproven_limit %d, addresses_proven %d" % (n, proven))
        check("healthy job beside the hijack: " + detail, ok)
        _, text = net.stop_server()
        check("the server ran to its stop", "phub: ready" in text)

    print("%-38s %-44s %-26s %-10s %s" % ("ATTACK", "EXPECTED", "OBSERVED", "OUT/IN", "COUNTER"))
    for name, expected, observed, ratio, counter in rows:
        print("ATTACK %-31s %-44s %-26s %-10.3f %s" % (name, expected, observed, ratio, counter))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

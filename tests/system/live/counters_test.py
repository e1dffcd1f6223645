#!/usr/bin/python3
"""One set of counters (issue 14): `phub-ctl stats --json`, DPDK's own dpdk-telemetry.py (/phub/ commands) and a
real Prometheus server scraping phub-server's endpoint give the same values.

The server (af_packet, workers in namespaces, counters sampled every 300 ms) runs job A (two verified ranks)
and job B with a rate limit far below its workers' rate (so rate_limited drops are counted against B); a few
datagrams to a UDP port of no job are counted as unknown_port. Prometheus (Debian's) runs in the server's
namespace with a generated config that scrapes the endpoint every 200 ms, its TSDB in a temporary directory.
During traffic, readings of the three that come from the same counter sample (its sequence number: `sample`
in the JSON and in telemetry, phub_sample_sequence in Prometheus) must be equal; after the traffic, once the
values are constant, every compared counter must be equal across the three. `promtool check metrics` must
accept a scrape of the endpoint without a word.
Usage: counters_test.py --build BUILD_DIR   (root; removes namespaces, processes and files, also on failure)
"""
import json
import os
import re
import subprocess
import sys
import time

import livenet
import promserver
from livenet import phubnet

INTERVAL_MS = 300
SCRAPE_MS = 200
SMALL = [4096, 100]
A = phubnet.job(1, "A", 2, [20000, 3000, 1], 42100)
B = phubnet.job(2, "B", 2, SMALL, 42200, rate_limit_pps=4000)
UNKNOWN_PORT = 40999
STRAY_DATAGRAMS = 37

# The compared counters: (name, its value in `stats --json`, where telemetry has it (command, key...), the
# Prometheus selector whose series it sums). phub labels a job's series job_name and job_id: `job` is the
# label Prometheus gives a scrape target.
COUNTERS = [
    ("A pushes", lambda s: livenet.job_of(s, "A")["pushes"], ("/phub/job,A", "pushes"),
     'phub_job_pushes_total{job_name="A"}'),
    ("A rounds_completed", lambda s: livenet.job_of(s, "A")["rounds_completed"], ("/phub/job,A", "rounds_completed"),
     'phub_job_rounds_completed_total{job_name="A"}'),
    ("A push_payload_bytes", lambda s: livenet.job_of(s, "A")["push_payload_bytes"],
     ("/phub/job,A", "push_payload_bytes"), 'phub_job_push_payload_bytes_total{job_name="A"}'),
    ("A results_sent", lambda s: livenet.job_of(s, "A")["results_sent"], ("/phub/job,A", "results_sent"),
     'phub_job_results_sent_total{job_name="A"}'),
    ("B pushes", lambda s: livenet.job_of(s, "B")["pushes"], ("/phub/job,B", "pushes"),
     'phub_job_pushes_total{job_name="B"}'),
    ("B drops rate_limited", lambda s: livenet.job_of(s, "B")["drops"]["rate_limited"],
     ("/phub/job,B", "drop_rate_limited"), 'phub_drops_total{job_name="B",reason="rate_limited"}'),
    ("all jobs pushes", lambda s: sum(j["pushes"] for j in s["jobs"]), ("/phub/stats", "pushes"),
     "phub_job_pushes_total"),
    ("all jobs rounds_completed", lambda s: sum(j["rounds_completed"] for j in s["jobs"]),
     ("/phub/stats", "rounds_completed"), "phub_job_rounds_completed_total"),
    ("drops unknown_port", lambda s: s["drops"]["unknown_port"], ("/phub/stats", "drop_unknown_port"),
     'phub_drops_total{reason="unknown_port"}'),
    ("drops rate_limited", lambda s: s["drops"]["rate_limited"], ("/phub/stats", "drop_rate_limited"),
     'phub_drops_total{reason="rate_limited"}'),
    ("lcores rx_packets", lambda s: sum(lc["rx_packets"] for lc in s["lcores"]), ("/phub/stats", "rx_packets"),
     "phub_lcore_rx_packets_total"),
    ("lcores tx_packets", lambda s: sum(lc["tx_packets"] for lc in s["lcores"]), ("/phub/stats", "tx_packets"),
     "phub_lcore_tx_packets_total"),
    ("port p0 rx_packets", lambda s: s["ports"][0]["rx_packets"], ("/phub/ports", "p0", "rx_packets"),
     'phub_port_rx_packets_total{port="p0"}'),
]
TELEMETRY = ["/phub/stats", "/phub/job,A", "/phub/job,B", "/phub/ports"]


def in_netns(net, argv, timeout_s=20, stdin=None):
    return promserver.in_netns(net.ns_server(), argv, timeout_s, stdin)


def http_get(net, url):
    return promserver.http_get(net.ns_server(), url)


def telemetry(net):
    """[(sample, {counter: value})] from one dpdk-telemetry.py run of every command in TELEMETRY."""
    rc, out, err = in_netns(net, ["timeout", "20", "/usr/bin/python3", "/usr/bin/dpdk-telemetry.py", "-f", net.prefix],
                            stdin="\n".join(TELEMETRY) + "\n")
    answers = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if rc != 0 or len(answers) != len(TELEMETRY):
        raise RuntimeError("dpdk-telemetry.py: exit %d: %s %s" % (rc, out[-300:], err[-300:]))
    readings = []
    for cmd, answer in zip(TELEMETRY, answers):
        data = list(answer.values())[0]
        values = {}
        for name, _, (command, *path), _ in COUNTERS:
            if command == cmd:
                v = data
                for key in path:
                    v = v[key]
                values[name] = v
        readings.append((data["sample"], values))
    return readings


def ctl_reading(ctl):
    """(sample, {counter: value}) from `phub-ctl stats --json`."""
    s = ctl.stats()
    return s["sample"], {name: f(s) for name, f, _, _ in COUNTERS}


class Prometheus(promserver.Prometheus):
    """Debian's prometheus in the server's namespace, scraping phub's endpoint; its TSDB in the test's directory."""

    def __init__(self, net, target_port):
        super().__init__(net.ns_server(), net.tmp, net.procs, target_port, SCRAPE_MS)  # phubnet stops it

    def scrapes(self, seconds):
        """{sample: {counter: value}} of every scrape of the last `seconds`, each counter summed over its series.
        Every query is evaluated at one instant a second ago, so that a scrape ingested between two queries is
        not seen by some of them only; a scrape is kept only if every counter has a value in it."""
        at = time.time() - 1.0
        by_time = {}
        for name, _, _, selector in COUNTERS:
            for r in self.api("%s[%ds]" % (selector, seconds), at):
                for t, v in r["values"]:
                    by_time.setdefault(t, {}).setdefault(name, 0)
                    by_time[t][name] += int(float(v))
        samples = {t: int(float(v)) for r in self.api("phub_sample_sequence[%ds]" % seconds, at)
                   for t, v in r["values"]}
        return {samples[t]: values for t, values in by_time.items() if t in samples and len(values) == len(COUNTERS)}


def send_stray(net, ns, count):
    """count UDP datagrams from worker namespace ns to a port of no job on the server."""
    code = ("import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for _ in range(int(sys.argv[3])): s.sendto(b'stray', (sys.argv[1], int(sys.argv[2])))\n")
    subprocess.run(["ip", "netns", "exec", net.ns_worker(ns), "/usr/bin/python3", "-c", code, phubnet.SERVER_IP,
                    str(UNKNOWN_PORT), str(count)], check=True, timeout=20)


def differences(a, b, c):
    return ["%s: ctl %s, telemetry %s, prometheus %s" % (n, a.get(n), b.get(n), c.get(n))
            for n, *_ in COUNTERS if not (a.get(n) == b.get(n) == c.get(n))]


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    with phubnet.Net(4, build_dir=build, lcores=1) as net:
        net.start_server([A, B], timeout_s=200, settings=dict(control=dict(metrics_interval_ms=INTERVAL_MS)))
        ctl = livenet.Ctl(net)
        port = int(re.search(r"phub: metrics: http://127\.0\.0\.1:(\d+)/metrics", open(net.server_log).read()).group(1))
        prom = Prometheus(net, port)

        scrape = http_get(net, "http://127.0.0.1:%d/metrics" % port)
        r = subprocess.run(["promtool", "check", "metrics"], input=scrape, capture_output=True, text=True, timeout=30)
        check("promtool check metrics on a scrape (%d lines): exit 0, nothing printed" % len(scrape.splitlines()),
              r.returncode == 0 and r.stdout == "" and r.stderr == "",
              "exit %d:\n%s" % (r.returncode, (r.stdout + r.stderr)[-2000:]))
        prom.wait_scraping()
        print("    prometheus at %s scrapes 127.0.0.1:%d every %d ms; counters sampled every %d ms"
              % (prom.url, port, SCRAPE_MS, INTERVAL_MS), flush=True)

        send_stray(net, 3, STRAY_DATAGRAMS)
        t0 = time.time()
        a_run = livenet.start_workers(net, "A", [0, 1], ["--seconds", "5"], net.config_path, 60)
        b_run = livenet.start_workers(net, "B", [2, 3], ["--rounds", "40"], net.config_path, 60)
        ctl_during, tel_during = {}, {}
        while any(p.poll() is None for p in a_run):
            readings = [("ctl", ctl_reading(ctl))] + [("tel", r) for r in telemetry(net)] + [("ctl", ctl_reading(ctl))]
            for source, (sample, values) in readings:
                (ctl_during if source == "ctl" else tel_during).setdefault(sample, {}).update(values)
        ok, detail = livenet.workers_ok(livenet.finish_workers(a_run, 60))
        check("A's traffic: every result verified", ok, detail)
        ok, detail = livenet.workers_ok(livenet.finish_workers(b_run, 60))
        check("B's traffic (rate-limited): every result verified", ok, detail)

        # During traffic: the three agree on every sample all three saw.
        prom_during = prom.scrapes(int(time.time() - t0) + 5)
        matched = [s for s in sorted(ctl_during) if s in prom_during and len(tel_during.get(s, {})) == len(COUNTERS)]
        for s in matched:
            print("    sample %d: A pushes %d, B rate_limited %d, rx_packets %d in all three" % (
                s, ctl_during[s]["A pushes"], ctl_during[s]["B drops rate_limited"], ctl_during[s]["lcores rx_packets"]))
        diffs = [(s, differences(ctl_during[s], tel_during[s], prom_during[s])) for s in matched]
        diffs = [d for d in diffs if d[1]]
        moving = len({ctl_during[s]["A pushes"] for s in matched}) >= 2
        check("during traffic: %d samples read by all three, %d counters each, equal" % (len(matched), len(COUNTERS)),
              len(matched) >= 2 and moving and not diffs,
              "samples ctl %s, telemetry %s, prometheus %s; differences %s" % (
                  sorted(ctl_during), sorted(tel_during), sorted(prom_during), diffs[:3]))

        # After traffic: once the values are constant, every counter the same in all three.
        deadline, last = time.time() + 15, ctl_reading(ctl)
        while time.time() < deadline:
            time.sleep(INTERVAL_MS / 1000)
            now = ctl_reading(ctl)
            if now[0] != last[0] and now[1] == last[1]:
                break
            last = now
        time.sleep((INTERVAL_MS + 3 * SCRAPE_MS) / 1000 + 1.0)  # scrapes() looks a second back
        final_ctl = ctl_reading(ctl)
        final_tel = {}
        for _, values in telemetry(net):
            final_tel.update(values)
        prom_after = prom.scrapes(3)
        final_prom = prom_after[max(prom_after)] if prom_after else {}
        print("    after traffic: ctl sample %d, prometheus sample %s" % (final_ctl[0], max(prom_after, default=None)))
        for name, *_ in COUNTERS:
            print("COUNTER %-26s ctl %10s  telemetry %10s  prometheus %10s" % (
                name, final_ctl[1].get(name), final_tel.get(name), final_prom.get(name)))
        diffs = differences(final_ctl[1], final_tel, final_prom)
        check("after traffic: the %d counters equal in phub-ctl, telemetry and Prometheus" % len(COUNTERS),
              not diffs and final_ctl[1]["B drops rate_limited"] > 0, "; ".join(diffs) or "no rate_limited drops")
        check("the %d stray datagrams counted once as unknown_port" % STRAY_DATAGRAMS,
              final_ctl[1]["drops unknown_port"] == STRAY_DATAGRAMS, "%d" % final_ctl[1]["drops unknown_port"])
        if check.failed:
            print(open(net.server_log).read()[-3000:])
        net.stop_server()
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

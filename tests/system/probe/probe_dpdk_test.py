#!/usr/bin/python3
"""System test: the DPDK path of `phub-probe agent` (net_af_packet on veths) against the kernel-UDP path.

Two namespace hosts A and B share two links: a direct veth, and a veth pair through a third namespace that
runs the testbed's user-space delay line (D us each way). On each link each host runs a kernel agent (on
the link's kernel address) and a DPDK agent (net_af_packet on the same interface, with its own address;
its control channel stays on kernel TCP). The coordinator probes one pair per run. All agents run under
SCHED_FIFO (see agent_argv), as the machine is shared with other work.

Checks (each can fail): every pair is measured with little loss; a DPDK agent's greeting advertises its
DPDK address; the DPDK agent answers ping and ARP; on the direct link the DPDK path's minimum RTT is not
larger than the kernel path's; on the delayed link both paths' minimum RTT lies between 2D (the physical
floor, which a wrong TSC rate would break) and 2 x 2D; the DPDK agents' counters show the probes went
through their ports; an agent under chrt that would busy-poll is refused. Prints every figure. Exits 77 (skipped) without root.
"""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
import testbed  # noqa: E402

PFX = "%spd%d" % (testbed.FAMILY, os.getpid())  # testbed.py cleanup removes what a killed run leaves
NS_A, NS_B, NS_DL = PFX + "-a", PFX + "-b", PFX + "-dl"
DELAY_US = 300
SAMPLES = 400
ROUNDS = 2  # direct-link runs are interleaved and repeated; the minimum over rounds is kept
AGENT_RT_PRIORITY = 10
DELAYLINE_RT_PRIORITY = 20  # the delay line stands in for the wire: it must not wait behind anything
AGENT_CPU = {"a": 0, "b": 1}  # the DPDK agents' CPU per host (the machine has at least two)
LINKS = {"direct": ("dir0", "198.18.77"), "delayed": ("dly0", "198.18.78")}


def agent_name(link, host, dpdk):
    return "%s%s-%s" % ("d" if dpdk else "k", host.upper(), link)


def control_endpoint(link, host, dpdk):
    """Kernel agents listen on the link's kernel address :7700, DPDK agents take control on it at :7701."""
    return "%s.%d:%d" % (LINKS[link][1], {"a": 1, "b": 2}[host], 7701 if dpdk else 7700)


def agent_argv(probe, link, host, dpdk):
    """The agent of `host` ("a"/"b") on `link`; a DPDK agent probes on its own address .101/.102.
    Every agent runs SCHED_FIFO (chrt): on this shared 2-CPU machine that stands in for the dedicated cores of
    a DPDK VM, for both paths alike. It cannot starve the machine: the kernel agent blocks, and the DPDK
    agent naps between the frames it expects (at least phub's real-time floor) and starts its EAL under
    SCHED_OTHER. Host A's DPDK agents run on CPU 0 and host B's on CPU 1 (docs/probe.md, "Real-time
    priority"), so the two ends of a probe never wait for each other's CPU; the agents that share a CPU are
    never probed at the same time (one pair per run)."""
    iface, net = LINKS[link]
    argv = ["chrt", "-f", str(AGENT_RT_PRIORITY), probe, "agent", "--listen", control_endpoint(link, host, dpdk)]
    if not dpdk:
        return argv
    cpu = AGENT_CPU[host]
    eal = "--no-huge --no-pci -m 128 -l %d --no-telemetry --log-level=*:warning --file-prefix %s" % (cpu, dpdk_prefix(link, host))
    argv = ["taskset", "-c", str(cpu)] + argv
    return argv + ["--dpdk", eal, "--port", "net_af_packet0,iface=%s" % iface,
                   "--ipv4", "%s.%d/24" % (net, 100 + {"a": 1, "b": 2}[host])]


def dpdk_prefix(link, host):
    return "%s-%s-%s" % (PFX, link, host)


def build_topology():
    sh = testbed.sh
    for ns in (NS_A, NS_B, NS_DL):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "link", "add", "dir0", "netns", NS_A, "type", "veth", "peer", "name", "dir0", "netns", NS_B)
    sh("ip", "link", "add", "dly0", "netns", NS_A, "type", "veth", "peer", "name", "dla", "netns", NS_DL)
    sh("ip", "link", "add", "dlb", "netns", NS_DL, "type", "veth", "peer", "name", "dly0", "netns", NS_B)
    for ns, octet in ((NS_A, 1), (NS_B, 2)):
        for iface, net in LINKS.values():
            sh("ip", "-n", ns, "addr", "add", "%s.%d/24" % (net, octet), "dev", iface)
            sh("ip", "-n", ns, "link", "set", iface, "up")
    for iface in ("dla", "dlb"):
        sh("ip", "-n", NS_DL, "link", "set", iface, "up")


def wait_ready(agents, timeout_s=60):
    deadline = time.time() + timeout_s
    for name, (proc, log) in agents.items():
        while "control on" not in read(log):
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("agent %s did not come up:\n%s" % (name, read(log)[-2000:]))
            time.sleep(0.1)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def greeting(addr, port):
    """HELLO over an agent's control port (authenticated), from namespace A."""
    return testbed.sh("ip", "netns", "exec", NS_A, "/usr/bin/python3",
                      os.path.join(ROOT, "tools", "testbed", "probe_control.py"), addr, str(port), "HELLO",
                      capture=True).strip()


def run_pair(probe, work, tag, prober, peer):
    """One coordinator run over two agents (the first one probes); returns the pair's statistics."""
    hosts = os.path.join(work, "hosts-" + tag)
    with open(hosts, "w") as f:
        f.write("%s %s\n%s %s\n" % (prober + peer))
    out = os.path.join(work, "out-" + tag)
    r = subprocess.run(["ip", "netns", "exec", NS_A, probe, "run", "--hosts", hosts, "--out", out,
                        "--samples", str(SAMPLES), "--no-progress"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("run %s exited %d: %s" % (tag, r.returncode, r.stderr[-1000:]))
    with open(os.path.join(out, "report.json")) as f:
        m = json.load(f)["matrix"]
    return {k: m[k][0][1] for k in ("rtt_min_us", "rtt_median_us", "rtt_p90_us", "loss")}


def stop(agents):
    for proc, _ in agents.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc, _ in agents.values():
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(probe, work, failures):
    kinds = {"kernel-kernel": (False, False), "dpdk-dpdk": (True, True), "kernel-dpdk": (False, True),
             "dpdk-kernel": (True, False)}
    results = {}
    for link, kind_names, rounds in (("direct", list(kinds), ROUNDS), ("delayed", ["kernel-kernel", "dpdk-dpdk"], 1)):
        for rnd in range(rounds):
            for kind in kind_names:
                first, second = kinds[kind]
                s = run_pair(probe, work, "%s-%s-%d" % (link, kind, rnd),
                             (agent_name(link, "a", first), control_endpoint(link, "a", first)),
                             (agent_name(link, "b", second), control_endpoint(link, "b", second)))
                if s["rtt_min_us"] is None:
                    failures.append("%s %s: no RTT measured" % (link, kind))
                    continue
                results.setdefault((link, kind), []).append(s)
    return results


def summarize(results):
    """Per pair kind over its runs: the lowest minimum, the upper median of the medians, the highest p90 and loss."""
    out = {}
    for key, runs in results.items():
        out[key] = {"min": min(r["rtt_min_us"] for r in runs),
                    "median": sorted(r["rtt_median_us"] for r in runs)[len(runs) // 2],
                    "p90": max(r["rtt_p90_us"] for r in runs), "loss": max(r["loss"] for r in runs)}
    return out


def check(stats, failures):
    print("%-8s %-14s %10s %10s %10s %6s" % ("link", "prober-peer", "min_us", "median_us", "p90_us", "loss"))
    for (link, kind), s in sorted(stats.items()):
        print("%-8s %-14s %10.1f %10.1f %10.1f %6.3f" % (link, kind, s["min"], s["median"], s["p90"], s["loss"]))
        if s["loss"] > 0.05:
            failures.append("%s %s: loss %.3f" % (link, kind, s["loss"]))
        if not 0 < s["min"] < 5000:
            failures.append("%s %s: minimum RTT %.1f us is not plausible" % (link, kind, s["min"]))
    k, d = stats.get(("direct", "kernel-kernel")), stats.get(("direct", "dpdk-dpdk"))
    if k and d:
        print("direct link minimum RTT: dpdk %.1f us, kernel %.1f us (ratio %.2f)" % (d["min"], k["min"], d["min"] / k["min"]))
        if d["min"] > k["min"]:
            failures.append("DPDK minimum RTT %.1f us is larger than the kernel's %.1f us" % (d["min"], k["min"]))
    floor, ceiling = 2 * DELAY_US, 2 * 2 * DELAY_US
    for kind in ("kernel-kernel", "dpdk-dpdk"):
        s = stats.get(("delayed", kind))
        if s and not floor <= s["min"] <= ceiling:
            failures.append("delayed link %s: minimum RTT %.1f us outside [%d, %d] us" % (kind, s["min"], floor, ceiling))
    if ("delayed", "dpdk-dpdk") in stats and ("delayed", "kernel-kernel") in stats:
        print("delayed link (%d us each way): dpdk minimum %.1f us, kernel minimum %.1f us, floor %d us" % (
            DELAY_US, stats[("delayed", "dpdk-dpdk")]["min"], stats[("delayed", "kernel-kernel")]["min"], floor))


def check_counters(agents, failures):
    """The DPDK agents print their port counters at exit: A's must have matched replies, B's reflected requests."""
    for name, (_, log) in sorted(agents.items()):
        if not name.startswith("d"):
            continue
        lines = [l for l in read(log).splitlines() if "dpdk port" in l]
        print("%s: %s" % (name, lines[-1].split(": ", 2)[-1] if lines else "no counters"))
        what = "probe replies matched" if name.startswith("dA") else "probe requests reflected"
        found = re.search(r"(\d+) " + what, lines[-1]) if lines else None
        if found is None or int(found.group(1)) < 0.9 * SAMPLES:
            failures.append("%s: %s %s" % (name, found.group(1) if found else "no", what))


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces")
        return 77
    probe = sys.argv[sys.argv.index("--probe") + 1]
    build_dir = sys.argv[sys.argv.index("--build-dir") + 1] if "--build-dir" in sys.argv else tempfile.gettempdir()
    testbed.install_signal_cleanup()
    os.environ["PHUB_PROBE_TOKEN"] = secrets.token_hex(16)  # agents, runs and probe_control.py inherit it
    failures, agents, delayline = [], {}, None
    work = tempfile.mkdtemp(prefix="phub-probe-dpdk-")
    try:
        delayline_exe = testbed.build_delayline(build_dir)
        build_topology()
        delayline = subprocess.Popen(["ip", "netns", "exec", NS_DL, "chrt", "-f", str(DELAYLINE_RT_PRIORITY), delayline_exe, "--a", "dla", "--b", "dlb",
                                      "--delay-us", str(DELAY_US)], stderr=subprocess.DEVNULL)
        # Under chrt a poller that would not give its CPU away is refused at start (docs/probe.md).
        argv = agent_argv(probe, "direct", "a", True) + ["--idle-sleep-us", "0"]
        r = subprocess.run(["ip", "netns", "exec", NS_A] + argv, capture_output=True, text=True, timeout=60)
        print("busy-polling agent under chrt: exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
        if r.returncode == 0 or "--idle-sleep-us = 0 busy-polls" not in r.stderr:
            failures.append("a busy-polling DPDK agent under chrt was not refused: %r" % r.stderr[-500:])
        shutil.rmtree("/var/run/dpdk/" + dpdk_prefix("direct", "a"), ignore_errors=True)
        for link in LINKS:
            for host, ns in (("a", NS_A), ("b", NS_B)):
                for dpdk in (False, True):
                    name = agent_name(link, host, dpdk)
                    log = os.path.join(work, name + ".log")
                    with open(log, "w") as f:
                        proc = subprocess.Popen(["ip", "netns", "exec", ns, *agent_argv(probe, link, host, dpdk)],
                                                stdout=f, stderr=subprocess.STDOUT)
                    agents[name] = (proc, log)
        t0 = time.time()
        wait_ready(agents)
        print("8 agents up in %.1f s" % (time.time() - t0))
        hello = greeting("198.18.77.2", 7701)
        print("dB-direct greeting: %s" % hello)
        if not hello.endswith(" dpdk 198.18.77.102:7701"):
            failures.append("greeting does not advertise the DPDK endpoint: %r" % hello)
        ping = testbed.sh("ip", "netns", "exec", NS_A, "ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.77.102",
                          check=False)
        if ping != 0:
            failures.append("the DPDK agent does not answer ping (ARP + ICMP)")
        t0 = time.time()
        stats = summarize(measure(probe, work, failures))
        print("probing took %.1f s" % (time.time() - t0))
        stop(agents)
        check(stats, failures)
        check_counters(agents, failures)
    except (RuntimeError, subprocess.SubprocessError) as e:
        failures.append(str(e))
    finally:
        stop(agents)
        if delayline is not None:
            delayline.terminate()
            delayline.wait(timeout=10)
        for ns in (NS_A, NS_B, NS_DL):
            testbed.delete_netns(ns)
        for link in LINKS:
            for host in "ab":
                shutil.rmtree("/var/run/dpdk/" + dpdk_prefix(link, host), ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

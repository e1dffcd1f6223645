#!/usr/bin/python3
"""System test: phub-probe's agent is not a tool for whoever reaches its control port.

Two namespace hosts A and B on one veth (198.18.79.0/24). A runs a kernel agent (and, with --dpdk, a DPDK
agent on net_af_packet over the same veth); B runs a kernel agent, UDP and TCP sinks that count what reaches
them, and this test's control connections (tools/testbed/probe_control.py, speaking the real protocol).

Checks (each can fail):
- without the token, with a wrong one, or with a forged line MAC, the agent closes the connection and sends
  no probe; it counts and logs each;
- a probe or bulk target outside the run's host list is refused and gets nothing, while a target inside it
  gets its datagrams (the sinks can see traffic);
- requests over the limits (count, pacing, payload, duration, bulk bytes, host list size, a second host list,
  connections) are refused with a reason and send nothing; the agent's threads stay bounded;
- the real coordinator still measures through the authenticated channel;
- with --dpdk: unsolicited ARP replies, ARP requests and gratuitous ARP naming a ghost address teach the DPDK
  station nothing (a probe to the ghost fails on ARP instead of going to the attacker's MAC) and are counted,
  while a real peer is still resolved and probed.
Exits 77 (skipped) without root.
"""
import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
import probe_control  # noqa: E402
import testbed  # noqa: E402

PFX = "%sps%d" % (testbed.FAMILY, os.getpid())  # testbed.py cleanup removes what a killed run leaves
NS_A, NS_B = PFX + "-a", PFX + "-b"
NET = "198.18.79"
A, B, OUTSIDER, DPDK_A, GHOST = NET + ".1", NET + ".2", NET + ".3", NET + ".101", NET + ".150"
PORT, DPDK_CTL_PORT, SINK_PORT, OUT_TCP_PORT = 7700, 7701, 7790, 7791
MAX_CONNECTIONS, HANDSHAKE_S = 16, 3.0  # Limits in app/phub-probe/control.hpp
FAKE_MAC = bytes.fromhex("020000000066")

libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def netns(name):
    """Runs the block in network namespace `name`: sockets made there stay there."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open("/var/run/netns/" + name, os.O_RDONLY)
    try:
        if libc.setns(target, 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), "setns " + name)
        yield
    finally:
        libc.setns(home, 0x40000000)
        os.close(home)
        os.close(target)


def session(addr, port, token, **kw):
    with netns(NS_B):
        return probe_control.Session(addr, port, token, **kw)


def raw_conn(addr, port):
    with netns(NS_B):
        s = socket.create_connection((addr, port), timeout=10)
    return probe_control.Session(addr, port, None, sock=s)


class Sinks:
    """UDP sockets at B:SINK_PORT (a host of the run) and OUTSIDER:SINK_PORT, a TCP listener at OUTSIDER."""

    def __init__(self):
        with netns(NS_B):
            self.inside = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.inside.bind((B, SINK_PORT))
            self.outside = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.outside.bind((OUTSIDER, SINK_PORT))
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.tcp.bind((OUTSIDER, OUT_TCP_PORT))
            self.tcp.listen(8)
        for s in (self.inside, self.outside, self.tcp):
            s.setblocking(False)

    @staticmethod
    def drain(sock, accept=False):
        n = 0
        while True:
            try:
                if accept:
                    sock.accept()[0].close()
                else:
                    sock.recv(4096)
                n += 1
            except BlockingIOError:
                return n

    def counts(self, settle_s=0.3):
        time.sleep(settle_s)
        return {"inside": self.drain(self.inside), "outside": self.drain(self.outside),
                "outside_tcp": self.drain(self.tcp, accept=True)}

    def close(self):
        for s in (self.inside, self.outside, self.tcp):
            s.close()


class Checker:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what):
        print("%s: %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            self.failures.append(what)


def hosts_line(extra=()):
    """The run's host list: both kernel agents, the sink at B as a host, and `extra` (ctl, probe) pairs."""
    entries = [("%s:%d" % (A, PORT),) * 2, ("%s:%d" % (B, PORT),) * 2, ("%s:%d" % (B, SINK_PORT),) * 2] + list(extra)
    return "HOSTS %d %s" % (len(entries), " ".join("%s %s" % e for e in entries))


def probe_cmd(addr, port, count=4, interval_us=1000, timeout_us=20000, payload=64, give_up=4):
    return "PROBE %s %d %d %d %d %d %d" % (addr, port, count, interval_us, timeout_us, payload, give_up)


def check_authentication(c, sinks, token):
    # No AUTH at all: a version-1 coordinator's first command.
    s = raw_conn(A, PORT)
    challenge = s.raw_line().decode()
    c.expect(challenge.startswith(probe_control.CHALLENGE), "the agent opens with a challenge: %r" % challenge[:40])
    s.send_raw(("%s\n" % probe_cmd(OUTSIDER, SINK_PORT)).encode())
    answer = s.raw_line().decode()
    c.expect(answer == "ERR authentication failed" and s.closed(), "a command without AUTH: refused and closed (%r)" % answer)
    # Nothing answered at all: closed after the handshake deadline.
    s2 = raw_conn(A, PORT)
    t0 = time.time()
    closed = s2.closed(wait=HANDSHAKE_S + 3)
    c.expect(closed and HANDSHAKE_S - 0.5 < time.time() - t0 < HANDSHAKE_S + 3,
             "a silent connection is closed after the handshake deadline (%.1f s)" % (time.time() - t0))
    # A wrong token.
    try:
        session(A, PORT, "not-the-token-but-long-enough")
        c.expect(False, "a wrong token was accepted")
    except probe_control.HandshakeError as e:
        c.expect("authentication failed" in str(e), "a wrong token: refused (%s)" % e)
    # The right token, then a line whose MAC is forged (an attacker injecting into the session).
    s3 = session(A, PORT, token)
    c.expect(s3.call(hosts_line()) == "OK 3", "the right token: a session, and the host list taken")
    s3.send(probe_cmd(B, SINK_PORT), forge_mac=True)
    c.expect(s3.closed(), "a line with a forged MAC closes the connection")
    got = sinks.counts()
    c.expect(got == {"inside": 0, "outside": 0, "outside_tcp": 0}, "nothing was sent for any of these: %s" % got)
    return 3, 1  # failed authentications, bad MACs


def check_targets_and_limits(c, sinks, token):
    s = session(A, PORT, token)
    r = s.call(probe_cmd(B, SINK_PORT))
    c.expect(r.startswith("ERR refused: no host list"), "PROBE before HOSTS: %r" % r)
    c.expect(s.call(hosts_line()) == "OK 3", "HOSTS taken")
    refused = 1
    r = s.call(hosts_line([("%s:%d" % (OUTSIDER, PORT), "%s:%d" % (OUTSIDER, SINK_PORT))]))
    c.expect(r.startswith("ERR refused: the run's host list is already set"), "a second HOSTS: %r" % r)
    r = s.call(probe_cmd(OUTSIDER, SINK_PORT))
    c.expect(r.startswith("ERR refused:") and "not a probe endpoint of this run" in r, "PROBE outside the run: %r" % r)
    r = s.call("BULK %s %d 4096" % (OUTSIDER, OUT_TCP_PORT))
    c.expect(r.startswith("ERR refused:") and "not a control endpoint of this run" in r, "BULK outside the run: %r" % r)
    refused += 3
    over = {"count": probe_cmd(B, SINK_PORT, count=10001, give_up=4),
            "interval": probe_cmd(B, SINK_PORT, interval_us=50),
            "timeout": probe_cmd(B, SINK_PORT, timeout_us=2000000),
            "payload": probe_cmd(B, SINK_PORT, payload=4096),
            "duration": probe_cmd(B, SINK_PORT, count=10000, interval_us=1000, timeout_us=100000, give_up=4),
            "give_up": probe_cmd(B, SINK_PORT, count=4, give_up=5),
            "bulk": "BULK %s %d %d" % (B, PORT, 64 * 1024 * 1024 + 1)}
    for what, cmd in over.items():
        r = s.call(cmd)
        c.expect(r is not None and r.startswith("ERR refused:"), "over the limit (%s): %r" % (what, r))
    refused += len(over)
    got = sinks.counts()
    c.expect(got == {"inside": 0, "outside": 0, "outside_tcp": 0}, "refused requests sent nothing: %s" % got)
    # The same session, a target of the run within the limits: the sink sees the datagrams (the test can see).
    r = s.call(probe_cmd(B, SINK_PORT, count=4, give_up=4))
    got = sinks.counts()
    c.expect(r == "SAMPLES 4" and got["inside"] == 4 and got["outside"] == 0,
             "a probe inside the run reaches its target: %r, sinks %s" % (r, got))
    s.close()
    # A host list above the limit, on a new session.
    s = session(A, PORT, token)
    big = ["%s.%d:%d %s.%d:%d" % ("198.18.80", i % 250, 1000 + i // 250, "198.18.80", i % 250, 1000 + i // 250)
           for i in range(1025)]
    r = s.call("HOSTS 1025 " + " ".join(big))
    c.expect(r is not None and r.startswith("ERR refused:") and "1024" in r, "1025 hosts: %r" % (r or "")[:80])
    refused += 1
    # SINK over the limit: refused and closed (its bytes would otherwise be read as commands).
    s.send("SINK %d" % (64 * 1024 * 1024 + 1))
    r = s.recv()
    c.expect(r is not None and r.startswith("ERR refused:") and s.closed(), "SINK over the limit: %r" % r)
    refused += 1
    return refused


def threads_of(pid):
    """Threads of the agent that `ip netns exec` (pid) runs: itself after its exec, else its child."""
    with open("/proc/%d/comm" % pid) as f:
        if f.read().strip() != "phub-probe":
            with open("/proc/%d/task/%d/children" % (pid, pid)) as c:
                pid = int(c.read().split()[0])
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def check_connection_limit(c, pid, token):
    held = [raw_conn(A, PORT) for _ in range(MAX_CONNECTIONS)]
    time.sleep(0.3)
    extra = raw_conn(A, PORT)
    line = extra.raw_line().decode()
    c.expect(line == "ERR refused: too many control connections" and extra.closed(),
             "connection %d: refused (%r)" % (MAX_CONNECTIONS + 1, line))
    n = threads_of(pid)
    c.expect(n <= MAX_CONNECTIONS + 2, "agent threads with %d connections open: %d (main + reflector + %d)" % (
        MAX_CONNECTIONS + 1, n, MAX_CONNECTIONS))
    closed = [h.closed(wait=HANDSHAKE_S + 3) for h in held]
    c.expect(all(closed), "the %d held connections are closed at the handshake deadline" % len(held))
    for h in held:
        h.close()
    time.sleep(0.5)
    s = session(A, PORT, token)
    c.expect(s.call("HELLO").startswith("OK phub-probe 2"), "after they are gone, a session works again")
    s.close()
    return MAX_CONNECTIONS  # failed authentications (the held connections)


def check_coordinator(c, probe, work, env):
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("a %s:%d\nb %s:%d\n" % (A, PORT, B, PORT))
    r = subprocess.run(["ip", "netns", "exec", NS_B, probe, "run", "--hosts", hosts, "--out", os.path.join(work, "out"),
                        "--no-progress", "--bandwidth", "--samples", "16"], env=env, capture_output=True, text=True,
                       timeout=60)
    c.expect(r.returncode == 0 and "(0 unreachable)" in r.stdout, "the coordinator measures through the channel: %s" % (
        r.stdout.splitlines()[:1] or r.stderr[-300:]))
    bad = dict(env, PHUB_PROBE_TOKEN="x" * 20)
    r = subprocess.run(["ip", "netns", "exec", NS_B, probe, "run", "--hosts", hosts, "--out", os.path.join(work, "out2"),
                        "--no-progress"], env=bad, capture_output=True, text=True, timeout=60)
    c.expect("refused the token" in r.stderr and "(2 unreachable)" in r.stdout,
             "a coordinator with another token is refused by both agents")
    return 1  # failed authentications at A


def arp_frame(op, dst_mac, src_mac, sender_mac, sender_ip, target_mac, target_ip):
    eth = dst_mac + src_mac + struct.pack(">H", 0x0806)
    arp = struct.pack(">HHBBH", 1, 0x0800, 6, 4, op) + sender_mac + socket.inet_aton(sender_ip) + target_mac + \
        socket.inet_aton(target_ip)
    return eth + arp + bytes(18)


def check_dpdk_arp(c, token, a_mac):
    """Hostile ARP from B at the DPDK station, then a probe to the ghost address it names."""
    with netns(NS_B):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind(("sec0", 0))
    bcast = b"\xff" * 6
    frames = [
        arp_frame(2, a_mac, FAKE_MAC, FAKE_MAC, GHOST, a_mac, DPDK_A),     # a reply nobody asked for, to the station
        arp_frame(2, bcast, FAKE_MAC, FAKE_MAC, GHOST, a_mac, DPDK_A),     # the same, broadcast
        arp_frame(1, bcast, FAKE_MAC, FAKE_MAC, GHOST, bytes(6), GHOST),   # gratuitous request
        arp_frame(2, bcast, FAKE_MAC, FAKE_MAC, GHOST, bcast, GHOST),      # gratuitous reply
        arp_frame(1, bcast, FAKE_MAC, FAKE_MAC, GHOST, bytes(6), DPDK_A),  # a request to the station: answered, not learnt
    ]
    for f in frames:
        s.send(f)
    s.close()
    time.sleep(0.3)
    sess = session(A, DPDK_CTL_PORT, token)
    entries = [("%s:%d" % (A, DPDK_CTL_PORT), "%s:%d" % (DPDK_A, DPDK_CTL_PORT)), ("%s:%d" % (GHOST, PORT),) * 2]
    c.expect(sess.call(hosts_line(entries)) == "OK 5", "the DPDK agent takes the host list")
    r = sess.call(probe_cmd(GHOST, PORT))
    c.expect(r is not None and r.startswith("ERR no ARP reply from %s" % GHOST),
             "a probe to the ghost fails on ARP: nothing was learnt from the hostile frames (%r)" % r)
    r = sess.call(probe_cmd(B, PORT, count=8, give_up=8))
    c.expect(r is not None and r.startswith("SAMPLES 8") and len(r.split()) > 4,
             "a real peer is still resolved (by its reply to the station's request) and probed: %r" % (r or "")[:60])
    sess.close()
    return len(frames) - 1  # counted as unsolicited or gratuitous


def start_agent(probe, ns, argv, log, env):
    with open(log, "w") as f:
        return subprocess.Popen(["ip", "netns", "exec", ns, probe, "agent", *argv], stdout=f, stderr=subprocess.STDOUT,
                                env=env)


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_ready(proc, log, timeout_s=60):
    deadline = time.time() + timeout_s
    while "control on" not in read(log):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError("agent did not come up:\n%s" % read(log)[-2000:])
        time.sleep(0.1)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def counter(log, pattern):
    m = re.findall(pattern, read(log))
    return int(m[-1]) if m else -1


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces")
        return 77
    probe = sys.argv[sys.argv.index("--probe") + 1]
    dpdk = "--dpdk" in sys.argv
    testbed.install_signal_cleanup()
    token = secrets.token_hex(16)
    env = dict(os.environ, PHUB_PROBE_TOKEN=token)
    c, procs, sinks = Checker(), [], None
    work = tempfile.mkdtemp(prefix="phub-probe-security-")
    logs = {k: os.path.join(work, k + ".log") for k in ("kA", "kB", "dA")}
    try:
        for ns in (NS_A, NS_B):
            testbed.sh("ip", "netns", "add", ns)
            testbed.sh("ip", "-n", ns, "link", "set", "lo", "up")
        testbed.sh("ip", "link", "add", "sec0", "netns", NS_A, "type", "veth", "peer", "name", "sec0", "netns", NS_B)
        testbed.sh("ip", "-n", NS_A, "addr", "add", A + "/24", "dev", "sec0")
        for addr in (B, OUTSIDER):
            testbed.sh("ip", "-n", NS_B, "addr", "add", addr + "/24", "dev", "sec0")
        for ns in (NS_A, NS_B):
            testbed.sh("ip", "-n", ns, "link", "set", "sec0", "up")
        # An agent refuses to start without a token.
        r = subprocess.run(["ip", "netns", "exec", NS_A, probe, "agent", "--listen", "%s:%d" % (A, PORT)],
                           env={k: v for k, v in env.items() if k != "PHUB_PROBE_TOKEN"}, capture_output=True,
                           text=True, timeout=30)
        c.expect(r.returncode != 0 and "token is required" in r.stderr, "an agent without a token does not start")
        ka = start_agent(probe, NS_A, ["--listen", "%s:%d" % (A, PORT)], logs["kA"], env)
        kb = start_agent(probe, NS_B, ["--listen", "%s:%d" % (B, PORT)], logs["kB"], env)
        procs += [ka, kb]
        wait_ready(ka, logs["kA"])
        wait_ready(kb, logs["kB"])
        if dpdk:
            eal = "--no-huge --no-pci -m 128 -l 0 --no-telemetry --log-level=*:warning --file-prefix %s" % PFX
            da = start_agent(probe, NS_A, ["--listen", "%s:%d" % (A, DPDK_CTL_PORT), "--dpdk", eal, "--port",
                                           "net_af_packet0,iface=sec0", "--ipv4", DPDK_A + "/24"], logs["dA"], env)
            procs.append(da)
            wait_ready(da, logs["dA"])
        sinks = Sinks()
        auth_failed, bad_mac = check_authentication(c, sinks, token)
        refused = check_targets_and_limits(c, sinks, token)
        auth_failed += check_connection_limit(c, ka.pid, token)
        auth_failed += check_coordinator(c, probe, work, env)
        arp_ignored = 0
        if dpdk:
            mac_hex = testbed.sh("ip", "netns", "exec", NS_A, "cat", "/sys/class/net/sec0/address", capture=True)
            arp_ignored = check_dpdk_arp(c, token, bytes.fromhex(mac_hex.strip().replace(":", "")))
        stop(procs)
        got = {k: counter(logs["kA"], r"(\d+) " + k) for k in
               ("failed authentication", "closed on a bad line MAC", "connections over the limit", "requests refused")}
        print("agent A's counters: %s" % got)
        c.expect(got["failed authentication"] == auth_failed, "failed authentications counted: %d, expected %d" % (
            got["failed authentication"], auth_failed))
        c.expect(got["closed on a bad line MAC"] == bad_mac, "bad line MACs counted: %d" % got["closed on a bad line MAC"])
        c.expect(got["connections over the limit"] == 1, "connections over the limit counted: %d" % got["connections over the limit"])
        c.expect(got["requests refused"] == refused, "refusals counted: %d, expected %d" % (got["requests refused"], refused))
        c.expect("failed authentication: wrong proof" in read(logs["kA"]), "the agent logs the failed authentication")
        if dpdk:
            n = counter(logs["dA"], r"(\d+) unsolicited ARP ignored")
            c.expect(n >= arp_ignored, "the DPDK station counted %d unsolicited or gratuitous ARP frames (sent %d)" % (
                n, arp_ignored))
    except (RuntimeError, OSError, subprocess.SubprocessError, probe_control.HandshakeError) as e:
        c.expect(False, "%s: %s" % (type(e).__name__, e))
    finally:
        stop(procs)
        if sinks is not None:
            sinks.close()
        for ns in (NS_A, NS_B):
            testbed.delete_netns(ns)
        shutil.rmtree("/var/run/dpdk/" + PFX, ignore_errors=True)
        for k, log in logs.items():
            if os.path.exists(log) and c.failures:
                print("--- %s log (tail)\n%s" % (k, read(log)[-1500:]))
        shutil.rmtree(work, ignore_errors=True)
    print("%d checks failed" % len(c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""phub-server on net_af_packet over a veth answers ARP and ping from a worker namespace like a host,
counts garbage UDP sent to a job port as malformed, and shuts down cleanly on SIGTERM."""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

NS = f"phubh{os.getpid() % 100000}"
HOST_IF = f"ph{os.getpid() % 100000}"
PEER_IF = HOST_IF + "w"
SERVER_IP = "198.18.7.1"
WORKER_IP = "198.18.7.2"

CONFIG = """
return {{
  eal_args = "--no-huge --no-pci -m 256 --file-prefix {prefix} --lcores (0-1)@(0,1) --log-level lib.eal:warning",
  ports = {{ {{ name = "p0", device = "net_af_packet_{tag},iface={iface},qpairs=1", ipv4 = "{ip}/24", steering = "ring" }} }},
  lcores = {{ {{ id = 1 }} }},
  polling = {{ idle_polls_before_sleep = 100, idle_sleep_us = 50 }},
  jobs = {{ {{ id = 7, name = "t", workers = 2, port_base = 41000, insecure = true, quota_bytes = "16MiB",
             keys = {{ {{ name = "w", elems = 1000 }} }} }} }},
  limits = {{ mbufs = 4095 }},
  control = {{ socket_path = "/tmp/{prefix}.ctl.sock", metrics_address = "127.0.0.1:0" }},
}}
"""


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def cleanup(server):
    if server and server.poll() is None:
        server.kill()
        server.wait()
    sh(f"ip netns del {NS}", check=False)
    sh(f"ip link del {HOST_IF}", check=False)


def scrape(port, timeout_s):
    """One GET /metrics on loopback: (seconds it took, the body), or (seconds, None) if it failed."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            body = b""
            while chunk := s.recv(65536):
                body += chunk
        return time.monotonic() - t0, body.decode(errors="replace")
    except OSError:
        return time.monotonic() - t0, None


def check_metrics_with_slow_clients(check, startup):
    """Clients that connect to the Prometheus endpoint and stall (more of them than it has threads) delay a
    real scrape by no more than its I/O timeout: they cannot take it down."""
    m = re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics", startup)
    check("the start-up names the metrics port", m is not None, startup[-400:])
    if m is None:
        return
    port = int(m.group(1))
    took, body = scrape(port, 10)
    check("a scrape answers", body is not None and "phub_" in body, str(body)[:300])
    stalled = []
    try:
        for i in range(8):  # twice the endpoint's threads; each sends half a request line and waits
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metr" if i % 2 == 0 else b"")
            stalled.append(s)
        took, body = scrape(port, 30)
        check("a scrape beside 8 stalled clients answers within 10 s (4 threads, 2 s I/O timeout)",
              body is not None and "phub_" in body and took < 10, "%.1f s: %s" % (took, str(body)[:200]))
    finally:
        for s in stalled:
            s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    args = ap.parse_args()
    server = None
    failures = []
    passed = 0

    def check(name, ok, detail=""):
        nonlocal passed
        if ok:
            passed += 1
            print(f"ok: {name}")
        else:
            failures.append(name)
            print(f"FAIL: {name} {detail}")

    # --print-config on the embedded default (whose jobs have secrets) prints no secret.
    dumped = subprocess.run([args.server, "--print-config"], capture_output=True, text=True, timeout=30)
    check("--print-config redacts every job's secret",
          dumped.returncode == 0 and "secret = \"<redacted: give the job's secret>\"" in dumped.stdout and
          "demo-allreduce-secret" not in dumped.stdout and "demo-parameter-server-secret" not in dumped.stdout,
          dumped.stdout[-600:] + dumped.stderr[-300:])
    try:
        sh(f"ip netns add {NS}")
        sh(f"ip link add {HOST_IF} type veth peer name {PEER_IF}")
        sh(f"ip link set {PEER_IF} netns {NS}")
        sh(f"ip link set {HOST_IF} up")
        sh(f"ip netns exec {NS} ip addr add {WORKER_IP}/24 dev {PEER_IF}")
        sh(f"ip netns exec {NS} ip link set {PEER_IF} up")
        sh(f"ip netns exec {NS} ip link set lo up")
        # A veth with TX checksum offload hands af_packet unfinished UDP checksums: let the kernel finish them.
        sh(f"ip netns exec {NS} ethtool -K {PEER_IF} tx off", check=False)
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write(CONFIG.format(prefix=f"phub-host-{os.getpid()}", tag=os.getpid() % 1000, iface=HOST_IF,
                                  ip=SERVER_IP))
            cfg = f.name
        server = subprocess.Popen([args.server, "--config", cfg, "--duration", "60"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 30
        ready = False
        startup = []
        while time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            startup.append(line)
            if "phub: ready" in line:
                ready = True
                break
        check("server starts and says ready", ready, "".join(startup))
        if not ready:
            return 1
        check_metrics_with_slow_clients(check, "".join(startup))

        ping = sh(f"ip netns exec {NS} ping -c 3 -i 0.2 -W 2 {SERVER_IP}", check=False)
        check("ping from the worker namespace", ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout)
        neigh = sh(f"ip netns exec {NS} ip neigh show {SERVER_IP}", check=False).stdout
        check("ARP resolved the server", "lladdr" in neigh, neigh)

        # Garbage to a job port: counted as malformed, the server keeps serving.
        send = ("import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"[s.sendto(b'not a phub header', ('{SERVER_IP}', 41000)) for _ in range(5)]")
        sh(f"ip netns exec {NS} /usr/bin/python3 -c \"{send}\"")
        time.sleep(0.5)
        ping2 = sh(f"ip netns exec {NS} ping -c 1 -W 2 {SERVER_IP}", check=False)
        check("still answers after garbage", ping2.returncode == 0, ping2.stdout)

        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
        check("clean exit on SIGTERM", server.returncode == 0, f"rc={server.returncode}")
        check("stopping line", "stopping on" in out, out[-500:])
        arp = re.search(r"arp_replies (\d+)", out)
        icmp = re.search(r"icmp_replies (\d+)", out)
        check("ARP replies counted", arp is not None and int(arp.group(1)) >= 1, out[-800:])
        check("ICMP replies counted", icmp is not None and int(icmp.group(1)) >= 4, out[-800:])
        check("garbage counted as malformed", "malformed_header_too_short 5" in out, out[-800:])
    finally:
        cleanup(server)
        try:
            os.unlink(cfg)
        except (NameError, OSError):
            pass
    print(f"SUBTESTS passed={passed} failed={len(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

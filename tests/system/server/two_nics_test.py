#!/usr/bin/python3
"""phub-server with two NICs and its lcores split per NIC, the layout an operator writes first on a
dual-socket server (docs/config.md, "Queues"): two net_af_packet ports with two queue pairs each, lcore 1
polling p0 only and lcore 2 p1 only, a 2-rank job with the default protection (sessions) and one rank
behind each port. Both ranks finish every round verified (phub-demo-worker checks each element), and
every RX queue of both ports is polled (the start-up map). A config whose af_packet port has fewer queue
pairs than lcores is refused by --check, naming the number to set.

Topology (198.18.0.0/23 only): <p>-srv holds eth0 and eth1 (the server's addresses 198.18.0.1 and
198.18.1.1 live in DPDK); eth0's veth peer is w0's eth0 (198.18.0.10/24), eth1's is w1's (198.18.1.11/24).
Usage: two_nics_test.py --build BUILD_DIR   (root; removes every namespace and process it made)
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
import phubnet  # noqa: E402
from phubnet import job, sh  # noqa: E402

SERVER_IPS = ["198.18.0.1", "198.18.1.1"]
WORKER_IPS = ["198.18.0.10", "198.18.1.11"]
ROUNDS = 5


class TwoNics(phubnet.Net):
    def up(self):
        srv = self.ns_server()
        self._netns(srv)
        for i in range(2):
            w = self.ns_worker(i)
            self._netns(w)
            sh("ip", "-n", srv, "link", "add", "eth%d" % i, "type", "veth", "peer", "name", "eth0", "netns", w)
            sh("ip", "-n", srv, "link", "set", "eth%d" % i, "up")
            sh("ip", "-n", w, "addr", "add", WORKER_IPS[i] + "/24", "dev", "eth0")
            sh("ip", "-n", w, "link", "set", "eth0", "up")
            # As phubnet: no UDP GSO, no TX checksum offload towards an af_packet server.
            sh("ip", "netns", "exec", w, "ethtool", "-K", "eth0", "tx-udp-segmentation", "off", check=False)
            sh("ip", "netns", "exec", w, "ethtool", "-K", "eth0", "tx", "off", check=False)

    def two_port_config(self, qpairs):
        text = self.config_text([job(1, "split", 2, [60000, 5000], 41000, reduce="sum",
                                     secret="a-secret-of-thirty-two-bytes-ok!", allowed_sources=["198.18.0.0/23"])])
        one = 'device = "%s"' % self.af_packet_device()
        assert one in text, text
        ports = ", ".join(
            '{ name = "p%d", device = "net_af_packet%d,iface=eth%d,qpairs=%d", ipv4 = "%s/24", mtu = 1500, '
            'rx_desc = 1024, tx_desc = 1024, steering = "ring" }' % (i, i, i, qpairs, SERVER_IPS[i]) for i in range(2))
        # The generated table has "ports = { ... }, lcores = { ... }, polling = ...": both replaced.
        start, end = text.index("ports = {"), text.index(", polling = {")
        lcores = 'lcores = { { id = 1, ports = { "p0" } }, { id = 2, ports = { "p1" } } }'
        return text[:start] + "ports = { " + ports + " }, " + lcores + text[end:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    with TwoNics(workers=2, build_dir=a.build, lcores=2) as net:
        server = net.exe("app/phub-server/phub-server")
        # Fewer queue pairs than lcores: each lcore needs a TX queue on each port.
        short = os.path.join(net.tmp, "short.lua")
        with open(short, "w") as f:
            f.write(net.two_port_config(qpairs=1))
        r = subprocess.run([server, "--check", "--config", short], capture_output=True, text=True, timeout=60)
        check("qpairs below the lcores is refused", r.returncode != 0 and "set qpairs=2" in r.stdout + r.stderr,
              "rc %d: %s" % (r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1:]))

        path = os.path.join(net.tmp, "phub.lua")
        with open(path, "w") as f:
            f.write(net.two_port_config(qpairs=2))
        net.config_path = path
        net.server = net.launch_server(net.ns_server(), path, net.server_log, timeout_s=300)
        log = open(net.server_log).read()
        for line in ("port p0: rx q0 lcore 1, q1 lcore 1;", "port p1: rx q0 lcore 2, q1 lcore 2;"):
            check("start-up map: " + line, line in log, "")

        procs = []
        for rank in range(2):
            argv = ["timeout", "120", net.exe("tools/phub-demo/phub-demo-worker"), "--config", path, "--job", "split",
                    "--rank", str(rank), "--server", SERVER_IPS[rank], "--rounds", str(ROUNDS)]
            procs.append(net.popen(rank, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for rank, p in enumerate(procs):
            so, se = p.communicate(timeout=150)
            s = phubnet.parse_summary(so)
            check("rank %d behind p%d finishes %d rounds verified" % (rank, rank, ROUNDS),
                  p.returncode == 0 and s.get("status") == "OK" and s.get("mismatches") == "0",
                  "rc %d %s %s" % (p.returncode, s, se.strip()[-300:]))
        counters, _ = net.stop_server()
        job_c = counters.get("job split", {})
        for i in range(2):
            port = counters.get("port p%d" % i, {})
            check("p%d received the pushes of its rank" % i, port.get("rx_packets", 0) > 0 and port.get("rx_missed", 0) == 0,
                  "rx_packets %s rx_missed %s" % (port.get("rx_packets"), port.get("rx_missed")))
        check("the job counted no frame lost to a ring or share", all(
            counters.get("drops", {}).get(d, 0) == 0 for d in ("ring_full", "handoff_share_full", "wrong_owner")),
            "drops %s; job %s" % (counters.get("drops"), {k: v for k, v in job_c.items() if v}))

    passed = sum(results)
    print("SUBTESTS passed=%d failed=%d" % (passed, len(results) - passed))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

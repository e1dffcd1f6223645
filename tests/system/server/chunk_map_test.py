#!/usr/bin/python3
"""The chunk-to-interface map (docs/config.md, "Chunk-to-interface map"): phub-server with two NICs (net_af_packet,
two queue pairs each), lcore 1 polling p0 only and lcore 2 p1 only, a 2-rank job with interface_map = true and
the default protection (sessions), and real worker processes (phub-demo-worker, through libphub-client) given one
server address, p0's. Each case checks every result element (the workers verify them) and the server's counters:

- two subnets (198.18.0.1/24 on p0, 198.18.1.1/24 on p1; the workers' namespace has an interface in each):
  lcore 2 moved to p1 by the redirect lcore 1 answers each rank's first join of lcore 2 with (moved=1 per rank,
  joins_redirected at least 2), no frame handed between lcores (redirected_out 0 on both), no chunk frame off
  its interface (off_interface 0), and each port's received and sent bytes in the chunk split's proportion
  (from the start-up line's elements per port) within 5 %;
- one subnet (198.18.0.1/24 and 198.18.0.2/24; the workers' two interfaces in one bridge, as one switch): the
  same;
- the wrong map: rank 1 with --one-address sends lcore 2's chunks to p0. Its frames are handed to lcore 2,
  counted (redirected_out, and off_interface on lcore 2), and every result is right.
Usage: chunk_map_test.py --build BUILD_DIR   (root; removes every namespace and process it made)
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
import phubnet  # noqa: E402
from phubnet import job, sh  # noqa: E402

ROUNDS = 40
# 3 chunks of 8192 elements: lcore 1 owns two, lcore 2 one. So p0 takes 2/3 of the bytes and p1 1/3.
KEYS = [24576]
SECRET = "a-secret-of-thirty-two-bytes-ok!"
SUBNETS = {  # case: (server addresses, worker addresses or None for one bridge address)
    "two subnets": (["198.18.0.1/24", "198.18.1.1/24"], ["198.18.0.10/24", "198.18.1.10/24"]),
    "one subnet": (["198.18.0.1/24", "198.18.0.2/24"], ["198.18.0.10/24"]),
}


class ChunkMapNet(phubnet.Net):
    """<p>-srv holds eth0 and eth1 (the server's ports); their veth peers are eth0 and eth1 of <p>-w0, the
    namespace of both workers: addressed one per subnet, or enslaved to one bridge (one subnet)."""

    def __init__(self, case, **kw):
        self.case = case
        super().__init__(**kw)

    def up(self):
        srv, w = self.ns_server(), self.ns_worker(0)
        self._netns(srv)
        self._netns(w)
        _, worker_ips = SUBNETS[self.case]
        for i in range(2):
            sh("ip", "-n", srv, "link", "add", "eth%d" % i, "type", "veth", "peer", "name", "eth%d" % i, "netns", w)
            sh("ip", "-n", srv, "link", "set", "eth%d" % i, "up")
            # As phubnet: no UDP GSO, no TX checksum offload towards an af_packet server.
            sh("ip", "netns", "exec", w, "ethtool", "-K", "eth%d" % i, "tx-udp-segmentation", "off", check=False)
            sh("ip", "netns", "exec", w, "ethtool", "-K", "eth%d" % i, "tx", "off", check=False)
        if len(worker_ips) == 2:
            for i in range(2):
                sh("ip", "-n", w, "addr", "add", worker_ips[i], "dev", "eth%d" % i)
                sh("ip", "-n", w, "link", "set", "eth%d" % i, "up")
        else:
            sh("ip", "-n", w, "link", "add", "br0", "type", "bridge")
            for i in range(2):
                sh("ip", "-n", w, "link", "set", "eth%d" % i, "master", "br0")
                sh("ip", "-n", w, "link", "set", "eth%d" % i, "up")
            sh("ip", "-n", w, "addr", "add", worker_ips[0], "dev", "br0")
            sh("ip", "-n", w, "link", "set", "br0", "up")

    def config(self):
        text = self.config_text([job(1, "split", 2, KEYS, 41000, reduce="sum", secret=SECRET, interface_map=True,
                                     allowed_sources=["198.18.0.0/23"])])
        start, end = text.index("ports = {"), text.index(", polling = {")
        ports = ", ".join(
            '{ name = "p%d", device = "net_af_packet%d,iface=eth%d,qpairs=2", ipv4 = "%s", mtu = 1500, '
            'rx_desc = 1024, tx_desc = 1024, steering = "ring" }' % (i, i, i, SUBNETS[self.case][0][i]) for i in range(2))
        lcores = 'lcores = { { id = 1, ports = { "p0" } }, { id = 2, ports = { "p1" } } }'
        return text[:start] + "ports = { " + ports + " }, " + lcores + text[end:]


def run_case(a, case, one_address_rank):
    with ChunkMapNet(case, workers=1, build_dir=a.build, lcores=2) as net:
        path = os.path.join(net.tmp, "phub.lua")
        with open(path, "w") as f:
            f.write(net.config())
        net.config_path = path
        net.server = net.launch_server(net.ns_server(), path, net.server_log, timeout_s=300)
        log = open(net.server_log).read()
        m = re.search(r"job 'split' chunk map: lcore 1 -> p0 \(\S+\), lcore 2 -> p1 \(\S+\); elems per port p0 (\d+) p1 (\d+)",
                      log)
        check(case + ": the start-up line gives the map", m is not None, (m.group(0) if m else log[-1500:]))
        if m is None:
            return
        share0 = int(m.group(1)) / (int(m.group(1)) + int(m.group(2)))
        server = SUBNETS[case][0][0].split("/")[0]
        procs = []
        for rank in range(2):
            argv = ["timeout", "120", net.exe("tools/phub-demo/phub-demo-worker"), "--config", path, "--job", "split",
                    "--rank", str(rank), "--server", server, "--rounds", str(ROUNDS)]
            if rank == one_address_rank:
                argv.append("--one-address")
            procs.append(net.popen(0, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for rank, p in enumerate(procs):
            so, se = p.communicate(timeout=150)
            s = phubnet.parse_summary(so)
            moved = "0" if rank == one_address_rank else "1"
            check("%s: rank %d finishes %d rounds verified, %s lcore moved" % (case, rank, ROUNDS, moved),
                  p.returncode == 0 and s.get("status") == "OK" and s.get("mismatches") == "0" and s.get("moved") == moved,
                  "rc %d %s %s" % (p.returncode, s, se.strip()[-300:]))
        counters, _ = net.stop_server()
        l1, l2 = counters.get("lcore 1", {}), counters.get("lcore 2", {})
        jc = counters.get("job split", {})
        redirected = l1.get("redirected_out", -1) + l2.get("redirected_out", -1)
        p0, p1 = counters.get("port p0", {}), counters.get("port p1", {})
        rx0, rx1, tx0, tx1 = (p0.get("rx_bytes", 0), p1.get("rx_bytes", 0), p0.get("tx_bytes", 0), p1.get("tx_bytes", 0))
        detail = "redirected_out %d (lcore 1 %s, lcore 2 %s), off_interface %s; rx bytes p0 %d p1 %d, tx p0 %d p1 %d; " \
                 "chunk split p0 %.4f" % (redirected, l1.get("redirected_out"), l2.get("redirected_out"),
                                          jc.get("off_interface"), rx0, rx1, tx0, tx1, share0)
        print("  " + case + ": " + detail, flush=True)
        if one_address_rank is None:
            check(case + ": no chunk frame off its interface (off_interface 0)", jc.get("off_interface", -1) == 0, detail)
            # The only frames of lcore 2 that reach p0 are each rank's first join (and its resends while no answer
            # came): lcore 1 answers them with a redirect to p1, nothing is handed over.
            check(case + ": no frame handed between lcores (redirected_out 0); each rank's first join of lcore 2 "
                  "redirected by lcore 1", redirected == 0 and jc.get("joins_redirected", 0) >= 2,
                  detail + "; joins_redirected %s" % jc.get("joins_redirected"))
            for what, b0, b1 in (("received", rx0, rx1), ("sent", tx0, tx1)):
                share = b0 / max(b0 + b1, 1)
                check("%s: bytes %s per port follow the chunk split within 5 %% (p0 %.4f vs %.4f)" % (case, what, share, share0),
                      abs(share - share0) <= 0.05 * share0 and abs((1 - share) - (1 - share0)) <= 0.05 * (1 - share0), detail)
        else:
            # Each of rank 1's pushes of lcore 2's chunk crossed from lcore 1: at least one per segment and round.
            segments = (KEYS[0] // 3 + 351) // 352
            check(case + ": the wrong map's frames are handed off and counted (redirected_out, off_interface)",
                  l1.get("redirected_out", 0) >= ROUNDS * segments and jc.get("off_interface", 0) >= ROUNDS * segments,
                  detail)
        check(case + ": no frame lost to a ring or share", all(
            counters.get("drops", {}).get(d, 0) == 0 for d in ("ring_full", "handoff_share_full", "wrong_owner")),
            "drops %s" % counters.get("drops"))


RESULTS = []  # one boolean per check


def check(name, ok, detail):
    RESULTS.append(ok)
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    for case, one_address_rank in (("two subnets", None), ("one subnet", None), ("two subnets", 1)):
        run_case(a, case, one_address_rank)
    print("SUBTESTS passed=%d failed=%d" % (sum(RESULTS), len(RESULTS) - sum(RESULTS)))
    return 0 if RESULTS and all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""tools/model's arithmetic on small clusters worked out by hand (tools/bench/lib/phubmodel), its calibration
from a bench JSON, and its refusals of bad inputs, each with an error that names the input.

Usage: model_test.py --source ROOT"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = None
MB = 1_000_000


def cluster(**kw):
    from phubmodel.systems import Cluster
    fields = dict(workers=4, racks=1, host_gbps=1.0, oversubscription=1.0, rtt_s=0.0, cross_rack_rtt_s=0.0,
                  model_bytes=10 * MB, compute_s=0.0, overlap=0.0, server_gbps=4.0, server_nics=1, server_lcores=1,
                  shards=1, ip_mtu=1500)
    fields.update(kw)
    return Cluster(**fields)


def cost(cycles_per_frame=0.0, cycles_per_byte=1e-6, tsc_hz=1e9):
    from phubmodel.calibration import ServerCost
    return ServerCost(cycles_per_frame, cycles_per_byte, tsc_hz, "test")


class Arithmetic(unittest.TestCase):
    def setUp(self):
        from phubmodel import systems
        self.s = systems
        self.phub = 1416 / (1416 + 96)  # 1500 - 20 - 8 - 54 = 1418, whole fp32: 1416; +96 header bytes on the wire
        self.tcp = 1448 / (1448 + 66)   # 1500 - 20 - 32 = 1448

    def test_frame_shares(self):
        self.assertEqual(self.s.phub_payload_bytes(1500), 1416)
        self.assertAlmostEqual(self.s.phub_goodput_share(1500), self.phub)
        self.assertAlmostEqual(self.s.tcp_goodput_share(1500), self.tcp)

    def test_ring_one_rack(self):
        # W = 4: each edge carries 2 x 3/4 of 10 MB = 15 MB = 120 Mbit at 1 Gbit/s; 6 steps of half a 1 ms RTT.
        c = cluster(rtt_s=1e-3)
        stages, total = self.s.ring_comm(c)
        self.assertAlmostEqual(stages["edge_bytes"], 0.120 / self.tcp)
        self.assertAlmostEqual(stages["latency"], 0.003)
        self.assertAlmostEqual(total, 0.120 / self.tcp + 0.003)

    def test_ring_across_racks(self):
        # 8 workers in 2 racks of 4, 4:1: uplink 1 Gbit/s. Planned: one edge per uplink at 1 Gbit/s. Shuffled:
        # 4 edges share it, 0.25 Gbit/s each. Edge bytes 2 x 7/8 x 10 MB = 17.5 MB = 140 Mbit.
        planned = cluster(workers=8, racks=2, oversubscription=4.0, cross_rack_rtt_s=2e-3)
        shuffled = cluster(workers=8, racks=2, oversubscription=4.0, cross_rack_rtt_s=2e-3, ring_order="shuffled")
        self.assertAlmostEqual(self.s.ring_comm(planned)[0]["edge_bytes"], 0.140 / self.tcp)
        self.assertAlmostEqual(self.s.ring_comm(shuffled)[0]["edge_bytes"], 0.560 / self.tcp)
        self.assertAlmostEqual(self.s.ring_comm(planned)[0]["latency"], 14 * 1e-3)

    def test_flat_ps(self):
        # W = 4 on 1 Gbit/s, one 4 Gbit/s server: worker link and server NIC both 80 Mbit / 1 Gbit/s; W = 8: the
        # NIC takes twice as long. Lcores: 1 us per frame (1000 cycles at 1 GHz, per byte ~0).
        k = cost(cycles_per_frame=1000.0)
        frames = math.ceil(4 * 10 * MB / 1416)
        stages, total = self.s.ps_comm(cluster(rtt_s=1e-3), k, 1)
        self.assertAlmostEqual(stages["worker_link"], 0.080 / self.phub)
        self.assertAlmostEqual(stages["server_nics"], 0.080 / self.phub)
        self.assertAlmostEqual(stages["server_lcores"], frames * (1000 + 1416e-6) / 1e9)
        self.assertAlmostEqual(total, 0.080 / self.phub + 1e-3)
        stages8, _ = self.s.ps_comm(cluster(workers=8), k, 1)
        self.assertAlmostEqual(stages8["server_nics"], 0.160 / self.phub)
        self.assertEqual(self.s.bottleneck(cluster(workers=8), k, "flat_ps"), "server_nics")

    def test_sharded_and_flat_across_racks(self):
        # 8 workers in 2 racks of 4 at 4:1 (uplink 1 Gbit/s). One server in rack 0: its uplink takes the other
        # rack's 4 x 10 MB = 320 Mbit. Two shards, one per rack: each uplink carries 4 x 10 MB / 2 each way.
        c = cluster(workers=8, racks=2, oversubscription=4.0, shards=2, server_gbps=100.0)
        self.assertAlmostEqual(self.s.ps_comm(c, cost(), 1)[0]["uplink"], 0.320 / self.phub)
        self.assertAlmostEqual(self.s.ps_comm(c, cost(), 2)[0]["uplink"], 0.160 / self.phub)

    def test_hier(self):
        # 2 racks of 2 at 4:1: uplink 2 x 1 / 4 = 0.5 Gbit/s; cross-rack bytes per uplink and direction
        # 2 x 1/2 x 10 MB = 10 MB; a hub's NIC carries 2 x 10 MB + 10 MB = 30 MB = 240 Mbit at 4 Gbit/s.
        c = cluster(workers=4, racks=2, oversubscription=4.0, rtt_s=1e-3, cross_rack_rtt_s=5e-3)
        stages, total = self.s.hier_comm(c, cost())
        self.assertAlmostEqual(stages["uplink"], 0.080 / 0.5 / self.phub)
        self.assertAlmostEqual(stages["hub_nics"], 0.240 / 4 / self.phub)
        self.assertAlmostEqual(stages["worker_link"], 0.080 / self.phub)
        self.assertAlmostEqual(total, 0.160 / self.phub + 6e-3)

    def test_overlap(self):
        self.assertAlmostEqual(self.s.overlapped_step_s(0.1, 0.05, 0.67), 0.1)   # all hidden
        self.assertAlmostEqual(self.s.overlapped_step_s(0.1, 0.1, 0.5), 0.15)    # 50 ms hidden of 100
        self.assertAlmostEqual(self.s.overlapped_step_s(0.1, 0.1, 0.0), 0.2)     # none hidden
        c = cluster(compute_s=0.1, overlap=0.5)
        self.assertAlmostEqual(self.s.step_s(c, cost(), "ring"),
                               0.1 + self.s.ring_comm(c)[1] - 0.05)

    def test_servers_at_link_rate(self):
        # 25 Gbit/s hosts, 100 Gbit/s NICs: 4 workers fit one NIC, 5 need two. A lcore of 1 cycle per byte at
        # 1 GHz takes 8 Gbit/s of payload: 4 x 25 Gbit/s of wire needs ceil(100 x share / 8) lcores.
        k = cost(cycles_per_byte=1.0)
        for w, nics in ((4, 1), (5, 2)):
            need = self.s.servers_at_link_rate(cluster(workers=w, host_gbps=25.0, server_gbps=100.0), k)
            self.assertEqual(need["ps"]["nics"], nics)
        need = self.s.servers_at_link_rate(cluster(workers=4, host_gbps=25.0, server_gbps=100.0), k)
        self.assertEqual(need["ps"]["lcores"], math.ceil(100 * self.phub / 8 - 1e-9))
        # Hier, 2 racks of 2 at 25 Gbit/s: each hub takes 2 + 2 x 1/2 host links = 75 Gbit/s: one NIC per rack.
        need = self.s.servers_at_link_rate(cluster(workers=4, racks=2, host_gbps=25.0, server_gbps=100.0,
                                                   oversubscription=4.0), k)["hier_phub"]
        self.assertEqual((need["nics"], need["servers"]), (2, 2))
        self.assertFalse(need["uplink_ok"])  # uplink 12.5 Gbit/s < the 25 Gbit/s cross-rack share


class Refusals(unittest.TestCase):
    def refused(self, words, **kw):
        from phubmodel import ModelError
        with self.assertRaises(ModelError) as e:
            cluster(**kw)
        self.assertIn(words, str(e.exception))

    def test_out_of_range(self):
        self.refused("workers = 1025 is outside", workers=1025)
        self.refused("workers = 1 is outside", workers=1)
        self.refused("racks = 65 is outside", workers=130, racks=65)
        self.refused("host_gbps = 400 is outside", host_gbps=400.0)
        self.refused("ip_mtu = 100 is outside", ip_mtu=100)

    def test_bad_values(self):
        self.refused("must split evenly", workers=10, racks=4)
        self.refused("oversubscription must be at least 1", oversubscription=0.5)
        self.refused("overlap is a share", overlap=1.5)
        self.refused("must be a finite number", rtt_s=float("nan"))
        self.refused("must be a whole number", workers=4.0)
        self.refused("must be a whole number", racks=True)
        self.refused("cannot be negative", compute_s=-1.0)
        self.refused("ring_order must be one of", ring_order="random")
        self.refused("at least one NIC", server_lcores=0)

    def test_bad_cost_and_system(self):
        from phubmodel import ModelError, systems
        with self.assertRaisesRegex(ModelError, "not usable"):
            cost(cycles_per_byte=0.0)
        with self.assertRaisesRegex(ModelError, "unknown system 'mesh'"):
            systems.comm(cluster(), cost(), "mesh")


class JsonFiles(unittest.TestCase):
    def write(self, data):
        f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(data, f)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name


class Calibration(JsonFiles):

    @staticmethod
    def run_at(mtu, payload, cycles, pps, busy):
        r = {"server_counters": {"pushes": 1000, "push_payload_bytes": 1000 * payload},
             "server_busy_cycles_per_packet": cycles, "pushes_pps": pps, "server_busy_percent": [busy]}
        return {"mtu": mtu, "server_runs": [r]}

    def test_line_through_two_mtus(self):
        # 1500 cycles at 1000 bytes, 5500 at 9000: 0.5 cycles per byte, 1000 per frame; TSC 1500 x 1e6 / 0.5.
        from phubmodel import calibration
        path = self.write({"mtu": [self.run_at(1500, 1000, 1500.0, 1e6, 50), self.run_at(9000, 9000, 5500.0, 3e9 * 0.5 / 5500, 50)]})
        k = calibration.from_pktgen(path)
        self.assertAlmostEqual(k.cycles_per_byte, 0.5)
        self.assertAlmostEqual(k.cycles_per_frame, 1000.0)
        self.assertAlmostEqual(k.tsc_hz, 3e9)
        self.assertAlmostEqual(k.seconds_per_frame(2000), 2000 / 3e9)

    def test_refuses_what_it_cannot_use(self):
        from phubmodel import ModelError, calibration
        for data, words in (({"mtu": [self.run_at(1500, 1000, 1500.0, 1e6, 50)]}, "two MTUs"),
                            ({"mtu": [{"mtu": 1500, "server_runs": [{}]}, {"mtu": 9000}]}, "no usable server run")):
            with self.assertRaisesRegex(ModelError, words):
                calibration.from_pktgen(self.write(data))
        with self.assertRaisesRegex(ModelError, "cannot read"):
            calibration.from_pktgen(os.path.join(ROOT, "no-such.json"))

    def test_committed_pktgen_json(self):
        from phubmodel import calibration
        k = calibration.from_pktgen(os.path.join(ROOT, "docs", "bench", "pktgen.json"))
        self.assertGreater(k.cycles_per_byte, 0)
        self.assertGreater(k.tsc_hz, 1e8)


class Measured(JsonFiles):
    def test_ddp_points(self):
        # Two workers, 1 M fp32 (4 MB): phub, gloo and MPI on nominal links, and phub again at the raw UDP rate.
        from phubmodel import measured
        path = self.write({"link_mbit": 1000, "server_mbit": 4000, "mtu": 9000, "lcores": 2,
                           "raw_udp_bytes_per_s": 1e8, "results": [
                               {"size": 1_000_000, "workers": 2, "phub_s": [0.3, 0.1, 0.2], "gloo_s": [0.4],
                                "mpi_s": [0.5, 0.6]}]})
        points = measured.from_ddp(path)
        self.assertEqual([(p.system, p.measured_s, p.links) for p in points][:3],
                         [("flat_ps", 0.2, "nominal"), ("ring", 0.4, "nominal"), ("ring", 0.55, "nominal")])
        c = points[0].cluster
        self.assertEqual((c.workers, c.racks, c.host_gbps, c.server_gbps, c.server_lcores, c.model_bytes),
                         (2, 1, 1.0, 4.0, 2, 4_000_000))
        from phubmodel.systems import phub_goodput_share
        self.assertAlmostEqual(points[3].cluster.host_gbps, 0.8 / phub_goodput_share(9000))

    def test_hier_points_and_old_json(self):
        from phubmodel import ModelError, measured
        data = {"access_mbit": 50.0, "hub_mbit": 200.0, "racks": 3, "hosts_per_rack": 4, "oversubscription": 4.0,
                "delays_us": [100, 200, 400], "ip_mtu": 1500, "server_lcores": 1, "tensor_bytes": 4 << 20,
                "median": {"hier": {"seconds": 1.0}, "gloo_shuffled": {"seconds": 5.0}}}
        points = measured.from_hier(self.write(data))
        self.assertEqual([(p.leg, p.system, p.cluster.ring_order) for p in points],
                         [("hier", "hier_phub", "planned"), ("gloo_shuffled", "ring", "shuffled")])
        self.assertAlmostEqual(points[0].cluster.cross_rack_rtt_s, 1.2e-3)  # 2 x (200 + 400) us
        self.assertAlmostEqual(points[0].cluster.uplink_bps(), 50e6)
        del data["delays_us"]
        with self.assertRaisesRegex(ModelError, "lacks delays_us"):
            measured.from_hier(self.write(data))


class TrainPoints(JsonFiles):
    @staticmethod
    def shape(**kw):
        system = {"step_median_s": 1.0, "compute_s": 0.2, "exchange_s": 0.7}
        data = {"racks": 3, "hosts_per_rack": 4, "access_mbit": 100.0, "hub_mbit": 400.0, "oversubscription": 4.0,
                "delays_us": [100, 200, 400], "ip_mtu": 1500, "server_lcores": 1, "params": 1000,
                "systems": {"gloo_shuffled": dict(system), "hier_ps": dict(system, step_median_s=0.5),
                            "phub_ar": dict(system)}}
        data.update(kw)
        return data

    def test_points_of_both_shapes(self):
        from phubmodel import measured
        flat = self.shape(racks=1, oversubscription=1.0, delays_us=[100],
                          systems={"gloo_planned": {"step_median_s": 2.0, "compute_s": 0.3, "exchange_s": 1.5}})
        points = measured.from_train(self.write({"shapes": {"racks": self.shape(), "flat": flat}}))
        self.assertEqual([(p.leg, p.system, p.cluster.ring_order, p.measured_s, p.exchange_s) for p in points],
                         [("flat gloo_planned", "ring", "planned", 2.0, 1.5),
                          ("racks phub_ar", "flat_ps", "planned", 1.0, 0.7),
                          ("racks hier_ps", "hier_phub", "planned", 0.5, 0.7),
                          ("racks gloo_shuffled", "ring", "shuffled", 1.0, 0.7)])
        f, r = points[0].cluster, points[1].cluster
        # The flat shape is one rack: its delay line sits on the uplink no exchange crosses, so no delay.
        self.assertEqual((f.workers, f.racks, f.worst_rtt_s(), f.compute_s, f.overlap), (4, 1, 0.0, 0.3, 0.0))
        self.assertEqual((r.workers, r.racks, r.host_gbps, r.server_gbps, r.model_bytes), (12, 3, 0.1, 0.4, 4000))
        self.assertAlmostEqual(r.cross_rack_rtt_s, 1.2e-3)  # 2 x (200 + 400) us
        self.assertAlmostEqual(r.uplink_bps(), 100e6)

    def test_malformed_json_is_refused_with_the_reason(self):
        from phubmodel import ModelError, measured
        no_compute = self.shape()
        del no_compute["systems"]["phub_ar"]["compute_s"]
        no_delays = self.shape()
        del no_delays["delays_us"]
        for data, words in (([1, 2], "has no 'shapes'"), ({"shapes": {}}, "has no 'shapes'"),
                            ({"shapes": {"racks": 7}}, "shape racks is not an object with 'systems'"),
                            ({"shapes": {"racks": no_delays}}, "lacks delays_us"),
                            ({"shapes": {"racks": no_compute}}, "system phub_ar lacks compute_s"),
                            ({"shapes": {"racks": self.shape(params="many")}}, "params = 'many' is not a number"),
                            ({"shapes": {"racks": self.shape(delays_us=[1, None])}}, "1 = None is not a number"),
                            ({"shapes": {"racks": self.shape(systems={"hier_ps": {"step_median_s": 0,
                                                                                  "compute_s": 0.1}})}},
                             "step_median_s = 0 is not a positive number"),
                            ({"shapes": {"racks": self.shape(systems={"mpi": {}})}}, "mpi not mapped"),
                            ({"shapes": {"racks": self.shape(hosts_per_rack=3.5)}}, "whole number")):
            with self.assertRaisesRegex(ModelError, words, msg=str(data)[:80]):
                measured.from_train(self.write(data))
        with self.assertRaisesRegex(ModelError, "cannot read"):
            measured.from_train(os.path.join(ROOT, "no-such.json"))

    def test_committed_train_json(self):
        # Every system of every shape the bench ran gives one point: none is dropped unmodelled.
        from phubmodel import measured
        path = os.path.join(ROOT, "docs", "bench", "train.json")
        with open(path) as f:
            shapes = json.load(f)["shapes"]
        legs = [p.leg for p in measured.from_train(path)]
        self.assertEqual(sorted(legs), sorted("%s %s" % (n, s) for n, sh in shapes.items() for s in sh["systems"]))


class Command(unittest.TestCase):
    def run_model(self, *args):
        return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "model")] + list(args),
                              capture_output=True, text=True, timeout=60)

    def test_refusal_exits_2_with_the_reason(self):
        r = self.run_model("predict", "--workers", "2048")
        self.assertEqual(r.returncode, 2)
        self.assertIn("workers = 2048 is outside the model's range", r.stderr)

    def test_rates_it_cannot_divide_by_are_refused_not_a_traceback(self):
        # The sharded PS is sized from the rates before anything else reads them.
        for flag, value, words in (("--server-gbps", "0", "a server needs a positive NIC rate"),
                                   ("--server-gbps", "nan", "server_gbps must be a finite number"),
                                   ("--host-gbps", "nan", "host_gbps must be a finite number"),
                                   ("--host-gbps", "inf", "host_gbps must be a finite number")):
            r = self.run_model("predict", flag, value)
            self.assertEqual(r.returncode, 2, f"{flag} {value}: {r.stderr}")
            self.assertIn(words, r.stderr, f"{flag} {value}")
            self.assertNotIn("Traceback", r.stderr, f"{flag} {value}")

    def test_validate_with_a_bad_or_missing_train_json(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write("{not json")
            f.flush()
            r = self.run_model("validate", "--train", f.name)
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read measured points from " + f.name, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        missing = os.path.join(ROOT, "no-such-train.json")
        r = self.run_model("validate", "--train", missing)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no %s (run tools/bench/train --json %s)" % (missing, missing), r.stdout)
        self.assertNotIn("| train |", r.stdout)

    def test_predict_prints_every_system(self):
        r = self.run_model("predict", "--workers", "64")
        self.assertEqual(r.returncode, 0, r.stderr)
        for s in ("ring", "flat_ps", "sharded_ps", "hier_phub"):
            self.assertIn("\n" + s, r.stdout)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    a, rest = ap.parse_known_args()
    ROOT = os.path.abspath(a.source)
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=1)

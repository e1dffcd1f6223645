#!/usr/bin/python3
"""System test: phub-probe recovers 3 emulated racks from 12 shuffled namespace hosts and its planned
rank order speeds up a real gloo allreduce over tbf-shaped 4:1 oversubscribed rack uplinks.

Checks (each can fail): ARI of the groups is 1.0; every output file is there and well formed; the rank
map and the hostfile agree; the probe finished in under 30 s; the Lua snippet names 3 racks; the planned
order beats the shuffled one clearly (>= 2x here; tools/bench/probe reports the 3x target). Prints the
measured figures. Exits 77 (skipped, with the reason) without root or without netns/tbf support.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
import testbed  # noqa: E402


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces")
        return 77
    lacks = testbed.kernel_lacks()
    if lacks:
        print("SKIP: this kernel lacks %s" % ", ".join(lacks))
        return 77
    with tempfile.TemporaryDirectory(prefix="phub-probe-system-") as work:
        out = os.path.join(work, "result.json")
        cmd = ["/usr/bin/python3", os.path.join(ROOT, "tools", "testbed", "probe_scenario.py"), *sys.argv[1:],
               "--json", out, "--reps", "2"]
        r = subprocess.run(cmd, timeout=280)
        if r.returncode != 0:
            print("FAIL: scenario exited with %d" % r.returncode)
            return 1
        with open(out) as f:
            res = json.load(f)
    failures = []
    print("ari=%.3f groups=%d probe_wall_s=%.2f" % (res["ari"], res["groups"], res["probe_wall_s"]))
    print("planned_speedup=%.2fx rack_grouped_speedup=%.2fx (over the shuffled order)"
          % (res["planned_speedup"], res["grouped_speedup"]))
    if res["ari"] != 1.0:
        failures.append("groups not recovered exactly (ARI %.3f)" % res["ari"])
    if res["output_problems"]:
        failures.append("outputs: %s" % res["output_problems"])
    if not res["planned_matches_hostfile"]:
        failures.append("rankmap.env and hostfile disagree on the rank order")
    if res["probe_wall_s"] >= 30:
        failures.append("probe took %.1f s (limit 30 s)" % res["probe_wall_s"])
    if res["racks_lua"].count("name = \"rack") != 3:
        failures.append("racks.lua does not name 3 racks")
    if res["uplink_load"]["planned"] != 1:
        failures.append("planned order crosses an uplink %d times at once" % res["uplink_load"]["planned"])
    if res["planned_speedup"] < 2.0:
        failures.append("planned order only %.2fx faster than shuffled" % res["planned_speedup"])
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

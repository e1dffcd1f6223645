#!/usr/bin/python3
"""phub-probe agents and coordinator over loopback: 16 live agents plus one unreachable host.

Checks: the run finishes in under 30 s at default settings; the unreachable host is reported and left out
of every plan (not fatal); the hostfile and rankmap.env name the 16 live hosts once, in the ring order.
"""
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time


def main():
    probe = sys.argv[sys.argv.index("--probe") + 1]
    live = ["127.0.3.%d" % i for i in range(1, 17)]
    dead = "127.0.3.99"
    env = dict(os.environ, PHUB_PROBE_TOKEN=secrets.token_hex(16))
    agents = [subprocess.Popen([probe, "agent", "--listen", "%s:7703" % a], stderr=subprocess.DEVNULL, env=env)
              for a in live]
    try:
        time.sleep(0.5)
        with tempfile.TemporaryDirectory(prefix="phub-probe-loopback-") as work:
            hosts = os.path.join(work, "hosts")
            with open(hosts, "w") as f:
                f.write("".join("vm%02d %s:7703\n" % (i, a) for i, a in enumerate(live)))
                f.write("gone %s:7703\n" % dead)
            out = os.path.join(work, "out")
            t0 = time.time()
            r = subprocess.run([probe, "run", "--hosts", hosts, "--out", out], timeout=60, text=True,
                               capture_output=True, env=env)
            wall = time.time() - t0
            print(r.stdout)
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            with open(os.path.join(out, "rankmap.env")) as f:
                env = [l.split() for l in f if l.strip()]
            with open(os.path.join(out, "hostfile")) as f:
                hostfile = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
    finally:
        for a in agents:
            a.terminate()
        for a in agents:
            a.wait(timeout=10)
    failures = []
    print("N=16 probe wall time %.2f s (limit 30 s), exit %d" % (wall, r.returncode))
    if r.returncode != 0:
        failures.append("run exited %d: %s" % (r.returncode, r.stderr[-400:]))
    if wall >= 30:
        failures.append("took %.1f s" % wall)
    gone = [h for h in report["hosts"] if h["name"] == "gone"]
    if not gone or not gone[0]["agent_unreachable"] or not gone[0]["excluded"]:
        failures.append("unreachable host not reported/excluded: %s" % gone)
    if "gone" not in report.get("probe", {}).get("unreachable", []):
        failures.append("probe.unreachable does not list the dead host")
    if sorted(hostfile) != sorted(live):
        failures.append("hostfile hosts %s" % hostfile)
    if [w[0] for w in env] != [h for h in report["ring"]["order"]] or any("WORLD_SIZE=16" not in w for w in env):
        failures.append("rankmap.env does not follow the ring order with WORLD_SIZE=16")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

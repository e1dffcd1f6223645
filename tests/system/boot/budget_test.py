#!/usr/bin/python3
"""The memory budget before boot (issue 33): `phub-server --check` prints what a config needs from the EAL's
memory and what its EAL arguments give, and refuses, with both numbers, a config that does not fit.

1. Every shipped config (config/phub.lua and config/examples/*.lua) passes --check against its own
   reservation: its EAL arguments fix one (--socket-mem, -m or --no-huge), and the budget fits in it.
2. A config sized to fit exactly is accepted; one more port (one more RX pool) is refused by --check and by
   a start (before the EAL takes anything), both naming the need and the reservation. The budget grows by
   that pool's size.
3. phub-boot refuses a reservation short of the budget, and reserves the budget where the config fixes none.
Nothing here starts an EAL: every run is --check, --print-boot-info, or a start refused before the EAL."""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import Checks, unwind_on_sigterm

MIB = 1024 * 1024
NEEDS = re.compile(r"^phub: memory: needs ([0-9.]+) MiB: .*; the EAL will have ([0-9.]+) MiB \(([^()]*)\)(, short of it.*)?$",
                   re.M)

PORT = '{{ name = "p{i}", device = "net_ring{i}", ipv4 = "198.18.{i}.1/24" }},'
CONFIG = """
return {{
  eal_args = "{eal}",
  ports = {{ {ports} }},
  lcores = {{ {{ id = 1 }} }},
  jobs = {{ {{ id = 1, name = "t", workers = 2, port_base = 41000, insecure = true,
             keys = {{ {{ name = "w", elems = 1000000 }} }} }} }},
  limits = {{ mbufs = 4095 }},
}}
"""


def run(cmd, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--boot", required=True, help="tools/phub-boot/phub-boot")
    ap.add_argument("--configs", required=True, help="the source tree's config/ directory")
    args = ap.parse_args()
    unwind_on_sigterm()
    check = Checks()

    # Every config shipped: the default and the examples, but for the files examples include (racks.lua, the
    # plan two-rack.lua reads), which are parts of a config and not configs.
    examples = sorted(glob.glob(os.path.join(args.configs, "examples", "*.lua")))
    included = set()
    for path in examples:
        with open(path) as f:
            included.update(re.findall(r'include\("([^"]+)"\)', f.read()))
    shipped = [os.path.join(args.configs, "phub.lua")] + [p for p in examples if os.path.basename(p) not in included]
    check("the shipped configs are found", len(shipped) >= 4 and "racks.lua" in included, f"{shipped} {included}")
    for path in shipped:
        name = os.path.relpath(path, os.path.dirname(args.configs))
        done = run([args.server, "--check", "--config", path])
        m = NEEDS.search(done.stdout)
        detail = f"rc={done.returncode}\n{done.stdout}{done.stderr}"
        ok = done.returncode == 0 and m is not None
        if ok:
            need, have, source = float(m.group(1)), float(m.group(2)), m.group(3)
            ok = need <= have and "free hugepages" not in source and "no hugepages" not in source and need > 0
        check(f"{name}: --check prints its budget, within its own reservation", ok, detail)

    def budget_mib(path):
        done = run([args.server, "--print-boot-info", "--config", path])
        if done.returncode != 0:
            return None
        return json.loads(done.stdout)["memory_bytes"] / MIB

    with tempfile.TemporaryDirectory(prefix="phub-budget-test-") as tmp:
        def config(name, eal, ports):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(CONFIG.format(eal=eal, ports=" ".join(PORT.format(i=i) for i in range(ports))))
            return path

        one = budget_mib(config("probe1.lua", "--no-huge -m 64", 1))
        two = budget_mib(config("probe2.lua", "--no-huge -m 64", 2))
        check("--print-boot-info gives the budget", one is not None and two is not None, f"{one} {two}")
        if one is None or two is None:
            return check.summary()
        # One RX pool of 4095 mbufs of about 2.3 KiB each, each on a 4 KiB page of its own (--no-huge: a mempool
        # puts no object across a page), and its mempool's header (its per-lcore caches: about 1 MiB), ring and
        # the port's descriptor rings: under 2 MiB more.
        check("one more port adds one RX pool to the budget", 4095 * 4 / 1024 < two - one < 4095 * 4 / 1024 + 2,
              f"one port {one:.1f} MiB, two ports {two:.1f} MiB")

        fits = int(one) + 1
        eal = f"--no-huge --no-pci -m {fits} --file-prefix phub-budget-test"
        ok_cfg = config("fits.lua", eal, 1)
        done = run([args.server, "--check", "--config", ok_cfg])
        check(f"one port in -m {fits}: accepted", done.returncode == 0 and NEEDS.search(done.stdout) is not None,
              done.stdout + done.stderr)

        big = config("one_pool_too_many.lua", eal, 2)
        for how, cmd in (("--check", [args.server, "--check", "--config", big]),
                         ("a start", [args.server, "--config", big])):
            done = run(cmd)
            err = done.stderr
            numbers = re.search(r"the config needs ([0-9.]+) MiB: .*the EAL will have ([0-9.]+) MiB \(--no-huge -m (\d+)\)", err)
            ok = (done.returncode == 1 and numbers is not None and abs(float(numbers.group(1)) - two) < 0.2 and
                  float(numbers.group(2)) == fits and int(numbers.group(3)) == fits)
            check(f"two ports in -m {fits}: {how} refuses, naming both numbers", ok,
                  f"rc={done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{err}")
        check("the refused start started no EAL", not os.path.exists("/var/run/dpdk/phub-budget-test"))

        # By socket: lcore 1 on CPU 0, so on socket 0 (sysfs), and the port's pool with it. --socket-mem 1,4096
        # gives far more than the budget in all, and 1 MiB on socket 0.
        socket_short = config("socket0_short.lua", "--socket-mem 1,4096 --lcores 1@0 --file-prefix phub-budget-test", 1)
        for how, cmd in (("--check", [args.server, "--check", "--config", socket_short]),
                         ("a start", [args.server, "--config", socket_short])):
            done = run(cmd)
            err = done.stderr
            numbers = re.search(r"memory: socket 0 needs ([0-9.]+) MiB: mbuf pools \(rx p0, transmit set\) .*; the EAL "
                                r"will have 1\.0 MiB there \(--socket-mem 1,4096\)", err)
            ok = (done.returncode == 1 and numbers is not None and float(numbers.group(1)) > 1 and
                  "the config needs" not in err)
            check(f"--socket-mem 1,4096, its socket 0 short and its total enough: {how} refuses, naming socket 0 "
                  "and both numbers", ok, f"rc={done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{err}")
        check("the start refused by socket started no EAL", not os.path.exists("/var/run/dpdk/phub-budget-test"))
        socket_ok = config("socket0_ok.lua", "--socket-mem 4096 --lcores 1@0 --file-prefix phub-budget-test", 1)
        done = run([args.server, "--check", "--config", socket_ok])
        lines = done.stdout.splitlines()
        ok = (done.returncode == 0 and NEEDS.search(done.stdout) is not None and
              any(re.fullmatch(r"phub: memory: socket 0 needs [0-9.]+ MiB: .*; the EAL will have 4096\.0 MiB there", l)
                  for l in lines) and
              any(l.startswith("phub: memory: socket any needs ") and l.endswith(
                  "; from the EAL's memory of any socket (its socket unknown before the start), in the total")
                  for l in lines) and
              "phub: memory: sockets (sysfs): lcore 1 on socket 0 (cpu 0); port p0 on socket any (a virtual device)"
              in lines)
        check("--socket-mem 4096 with lcore 1 on CPU 0: --check prints the share of socket 0 and of any socket",
              ok, done.stdout + done.stderr)

        short = config("short.lua", "-m 32 --file-prefix t", 1)
        short_need = budget_mib(short)  # on hugepages: less than on --no-huge's 4 KiB pages, still over 32 MiB
        done = run([args.boot, "--server", args.server, "--config", short, "--page-size", "2M", "--dry-run"])
        check(f"phub-boot refuses -m 32 for a config that needs {short_need:.1f} MiB, with both numbers",
              done.returncode == 1 and short_need > 32 and
              f"-m 32 gives the EAL 32 MiB, and the config needs {-int(-short_need // 1)} MiB" in done.stderr,
              done.stdout + done.stderr)

        bare16 = config("bare16.lua", "--file-prefix t", 1)
        done = run([args.boot, "--server", args.server, "--config", bare16, "--hugepages", "16M", "--page-size", "2M",
                    "--dry-run"])
        check(f"phub-boot refuses --hugepages 16M for a config that needs {short_need:.1f} MiB, with both numbers",
              done.returncode == 1 and
              f"--hugepages 16M reserves 16 MiB, and the config needs {-int(-short_need // 1)} MiB" in done.stderr,
              done.stdout + done.stderr)

        done = run([args.boot, "--server", args.server, "--config", short, "--hugepages", "1G", "--page-size", "2M",
                    "--dry-run"])
        check("phub-boot refuses -m 32 even where --hugepages reserves enough: the EAL takes only 32 MiB",
              done.returncode == 1 and "-m 32 gives the EAL 32 MiB" in done.stderr, done.stdout + done.stderr)

        bare = config("bare.lua", "--file-prefix t", 1)
        need = budget_mib(bare)
        need_mib = -int(-need // 1)  # rounded up to whole MiB, as phub-boot does
        pages = -(-need_mib // 2)  # whole 2 MiB pages
        done = run([args.boot, "--server", args.server, "--config", bare, "--page-size", "2M", "--no-bind", "--dry-run"])
        want = f"phub-boot: hugepages: {pages} x 2M on any node for {need_mib} MiB (the server's memory budget"
        check("phub-boot reserves the budget where the config fixes no reservation",
              done.returncode == 0 and any(line.startswith(want) for line in done.stdout.splitlines()),
              f"want {want}\n{done.stdout}{done.stderr}")
        done = run([args.server, "--check", "--config", bare])
        check("--check reports, and does not refuse, the free hugepages phub-boot has yet to raise",
              done.returncode == 0 and NEEDS.search(done.stdout) is not None, done.stdout + done.stderr)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

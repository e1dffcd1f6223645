#!/usr/bin/python3
"""tools/phub-boot --dry-run on the shipped and on test configs: the hugepage reservations, mounts and NIC
bindings it would make, command for command. Nothing is run for real: fake dpdk-hugepages.py, dpdk-devbind.py,
modprobe and mkdir stand first on PATH and record any call, and the test fails if one was made. The real mode
is only tried as an unprivileged user, where it must refuse before doing anything."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from checks import Checks, unwind_on_sigterm

TOOLS = ("dpdk-hugepages.py", "dpdk-devbind.py", "modprobe", "mkdir")

CONFIG = """
return {{
  eal_args = "{eal}",
  ports = {{
    {{ name = "fast0", device = "3b:00.1,rxq_cqe_comp_en=0", ipv4 = "198.18.9.1/24" }},
    {{ name = "virt0", device = "net_ring0", ipv4 = "198.18.10.1/24" }},
  }},
  lcores = {{ {{ id = 1 }} }},
  jobs = {{ {{ id = 1, name = "t", workers = 2, port_base = 41000, insecure = true, keys = {{ {{ name = "w", elems = 1000 }} }} }} }},
}}
"""


def run_boot(boot, server, env, *args, user=None):
    cmd = [boot, "--server", server, *args]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    planned = [line.split("would run: ", 1)[1].split("    # ", 1)[0]
               for line in done.stdout.splitlines() if "would run: " in line]
    return done, planned


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--boot", required=True, help="tools/phub-boot/phub-boot")
    ap.add_argument("--server", required=True)
    ap.add_argument("--configs", required=True, help="the source tree's config/ directory")
    args = ap.parse_args()
    unwind_on_sigterm()
    check = Checks()

    with tempfile.TemporaryDirectory(prefix="phub-boot-test-") as tmp:
        os.chmod(tmp, 0o755)  # the unprivileged case reads its config here
        fakes = os.path.join(tmp, "bin")
        os.mkdir(fakes)
        calls = os.path.join(tmp, "calls.log")
        for tool in TOOLS:
            path = os.path.join(fakes, tool)
            with open(path, "w") as f:
                f.write(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n')
            os.chmod(path, 0o755)
        env = dict(os.environ, PATH=fakes + ":" + os.environ.get("PATH", "/usr/bin:/bin"))

        def config(name, eal):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(CONFIG.format(eal=eal))
            os.chmod(path, 0o644)
            return path

        def case(name, argv, want_rc, want_planned=None, want_lines=(), want_err=None, user=None):
            done, planned = run_boot(args.boot, args.server, env, *argv, user=user)
            detail = f"rc={done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            ok = done.returncode == want_rc
            if want_planned is not None:
                ok = ok and planned == want_planned
            ok = ok and all(line in done.stdout.splitlines() for line in want_lines)
            ok = ok and (want_err is None or want_err in done.stderr)
            check(name, ok, detail + (f"\nwanted commands: {want_planned}" if want_planned is not None else ""))

        rack = os.path.join(args.configs, "examples", "rack.lua")
        case("rack.lua: 1G pages on node 0 in its --huge-dir, both PCI NICs to vfio-pci",
             ["--config", rack, "--page-size", "1G", "--dry-run"], 0, [
                 "dpdk-hugepages.py --pagesize 1G --node 0 --reserve 4096M",
                 "mkdir -p /dev/hugepages1G",
                 "dpdk-hugepages.py --pagesize 1G --mount --directory /dev/hugepages1G",
                 "modprobe vfio-pci",
                 "dpdk-devbind.py --bind vfio-pci 0000:3b:00.0 0000:3b:00.1",
             ], ["phub-boot: hugepages: 4 x 1G on node 0 for 4096 MiB (--socket-mem 4096,0)",
                 "phub-boot: port nic0: PCI 0000:3b:00.0 -> vfio-pci",
                 "phub-boot: port nic1: PCI 0000:3b:00.1 -> vfio-pci",
                 "phub-boot: dry run: nothing was changed"])

        case("two-rack.lua: 2M pages for --socket-mem 4096, the default mount, one NIC",
             ["--config", os.path.join(args.configs, "examples", "two-rack.lua"), "--page-size", "2M", "-n"], 0, [
                 "dpdk-hugepages.py --pagesize 2M --node 0 --reserve 4096M",
                 "dpdk-hugepages.py --pagesize 2M --mount --directory /dev/hugepages",
                 "modprobe vfio-pci",
                 "dpdk-devbind.py --bind vfio-pci 0000:5e:00.0",
             ], ["phub-boot: hugepages: 2048 x 2M on node 0 for 4096 MiB (--socket-mem 4096)"])

        case("the embedded default (af_packet, --no-huge): nothing to do",
             ["--dry-run"], 0, [],
             ["phub-boot: hugepages: none needed (--no-huge)",
              "phub-boot: port demo0: 'net_af_packet0,iface=phub0,qpairs=2,framecnt=4096' is not a PCI address "
              "(a virtual device): nothing to bind"])

        mem = config("mem.lua", "-m 1000 --file-prefix t")
        case("-m 1000 on 2M pages: 500 pages on any node; a short PCI address with devargs; a vdev skipped",
             ["--config", mem, "--page-size", "2M", "--driver", "uio_pci_generic", "--dry-run"], 0, [
                 "dpdk-hugepages.py --pagesize 2M --reserve 1000M",
                 "dpdk-hugepages.py --pagesize 2M --mount --directory /dev/hugepages",
                 "modprobe uio_pci_generic",
                 "dpdk-devbind.py --bind uio_pci_generic 0000:3b:00.1",
             ], ["phub-boot: hugepages: 500 x 2M on any node for 1000 MiB (-m 1000)",
                 "phub-boot: port virt0: 'net_ring0' is not a PCI address (a virtual device): nothing to bind"])

        # Lcore 1 runs on CPU 1 (no -l or --lcores), on socket 0 here: node 0 needs its share of the budget.
        odd = config("odd.lua", "--socket-mem=200,0,1500 --huge-dir=/mnt/huge")
        case("--socket-mem=200,0,1500 rounds up to whole 1G pages on nodes 0 and 2, none on node 1; --no-bind binds "
             "nothing",
             ["--config", odd, "--page-size", "1G", "--no-bind", "--dry-run"], 0, [
                 "dpdk-hugepages.py --pagesize 1G --node 0 --reserve 1024M",
                 "dpdk-hugepages.py --pagesize 1G --node 2 --reserve 2048M",
                 "mkdir -p /mnt/huge",
                 "dpdk-hugepages.py --pagesize 1G --mount --directory /mnt/huge",
             ], ["phub-boot: port fast0: PCI 0000:3b:00.1: left on its driver (--no-bind)"])

        bare = config("bare.lua", "--file-prefix t")
        done = subprocess.run([args.server, "--print-boot-info", "--config", bare], capture_output=True, text=True,
                              timeout=60)
        need_mib = -(-int(json.loads(done.stdout)["memory_bytes"]) // (1024 * 1024)) if done.returncode == 0 else 0
        check("--print-boot-info gives the memory budget", need_mib > 0, done.stdout + done.stderr)
        case("no --socket-mem, -m or --no-huge: the server's memory budget, on any node",
             ["--config", bare, "--page-size", "2M", "--no-bind", "--dry-run"], 0, [
                 f"dpdk-hugepages.py --pagesize 2M --reserve {-(-need_mib // 2) * 2}M",
                 "dpdk-hugepages.py --pagesize 2M --mount --directory /dev/hugepages",
             ], [f"phub-boot: hugepages: {-(-need_mib // 2)} x 2M on any node for {need_mib} MiB (the server's memory "
                 "budget (phub-server --check))"])
        case("... or --hugepages says how much",
             ["--config", bare, "--page-size", "1G", "--hugepages", "3G", "--no-bind", "--dry-run"], 0, [
                 "dpdk-hugepages.py --pagesize 1G --reserve 3072M",
                 "dpdk-hugepages.py --pagesize 1G --mount --directory /dev/hugepages",
             ])

        broken = os.path.join(tmp, "broken.lua")
        with open(broken, "w") as f:
            f.write(CONFIG.format(eal="-m 64").replace("workers = 2", "workers = 0"))
        case("a config that fails validation: refused with the field", ["--config", broken, "--dry-run"], 1,
             want_err="jobs[1].workers: 0 is not in 1..1024")

        case("a dry run needs no root", ["--config", rack, "--page-size", "1G", "--dry-run"], 0,
             want_lines=["phub-boot: dry run: nothing was changed"], user="65534")
        case("the real mode refuses without root, before reading the config",
             ["--config", rack, "--page-size", "1G"], 1, [], want_err="must run as root", user="65534")

        # A two-node machine, as --print-boot-info reports one: a stand-in server prints its JSON (this machine has
        # one node). 100.5 MiB on socket 0, 40 MiB on socket 1, 16.5 MiB that may land on either.
        def two_node_server(name, eal):
            path = os.path.join(tmp, name)
            info = {"eal_args": eal, "memory_bytes": (100 * 1024 + 512 + 40 * 1024 + 16 * 1024 + 512) * 1024,
                    "memory_sockets": [{"socket": -1, "bytes": (16 * 1024 + 512) * 1024},
                                       {"socket": 0, "bytes": (100 * 1024 + 512) * 1024},
                                       {"socket": 1, "bytes": 40 * 1024 * 1024}],
                    "numa_nodes": [0, 1], "ports": []}
            with open(path, "w") as f:
                f.write(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(info)}\nEOF\n")
            os.chmod(path, 0o755)
            return path

        servers = []

        def two_node_case(name, eal, argv, want_rc, want_planned=None, want_lines=(), want_err=None):
            servers.append(name)
            done, planned = run_boot(args.boot, two_node_server(f"server{len(servers)}", eal), env, *argv)
            detail = f"rc={done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}\nplanned {planned}"
            ok = done.returncode == want_rc and (want_planned is None or planned == want_planned)
            ok = ok and all(line in done.stdout.splitlines() for line in want_lines)
            check(name, ok and (want_err is None or want_err in done.stderr), detail)

        two_node_case("two nodes, no reservation fixed: each socket's share on its node, the rest on node 0",
                      ["--file-prefix", "t"], ["--page-size", "2M", "--dry-run"], 0, [
                          "dpdk-hugepages.py --pagesize 2M --node 0 --reserve 118M",
                          "dpdk-hugepages.py --pagesize 2M --node 1 --reserve 40M",
                          "dpdk-hugepages.py --pagesize 2M --mount --directory /dev/hugepages",
                      ], ["phub-boot: memory: the config needs 157 MiB (socket 0 101 MiB, socket 1 40 MiB, any "
                          "socket 17 MiB; phub-server --check says what for)",
                          "phub-boot: hugepages: 59 x 2M on node 0 for 117 MiB (the server's memory budget by socket "
                          "(phub-server --check))",
                          "phub-boot: hugepages: 20 x 2M on node 1 for 40 MiB (the server's memory budget by socket "
                          "(phub-server --check))"])
        two_node_case("two nodes, --socket-mem short on socket 0 while its total is enough: refused, with both",
                      ["--socket-mem", "64,1024", "--file-prefix", "t"], ["--page-size", "2M", "--dry-run"], 1, [],
                      want_err="--socket-mem 64,1024 gives the EAL 64 MiB on socket 0, and the config needs 101 MiB "
                               "there")
        two_node_case("two nodes, --socket-mem naming socket 0 alone: socket 1 gets none, refused",
                      ["--socket-mem", "1024", "--file-prefix", "t"], ["--page-size", "2M", "--dry-run"], 1, [],
                      want_err="--socket-mem 1024 gives the EAL 0 MiB on socket 1, and the config needs 40 MiB there")
        two_node_case("two nodes, --socket-mem with room on each socket: as it says",
                      ["--socket-mem", "128,64", "--file-prefix", "t"], ["--page-size", "2M", "--dry-run"], 0, [
                          "dpdk-hugepages.py --pagesize 2M --node 0 --reserve 128M",
                          "dpdk-hugepages.py --pagesize 2M --node 1 --reserve 64M",
                          "dpdk-hugepages.py --pagesize 2M --mount --directory /dev/hugepages",
                      ])

        made = open(calls).read() if os.path.exists(calls) else ""
        check("no tool was run by any of these", made == "", made)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

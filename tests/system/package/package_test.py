#!/usr/bin/python3
"""The Debian packages build, install, work and purge without a trace.

1. tools/package.sh builds phub, libphub-client1, libphub-client-dev and python3-phub (its meson build
   directory is kept in <build>/package, so that a second run compiles only what changed). lintian runs on
   them: every tag is printed, and an error fails the test.
2. The packages hold what they must: every binary and its man page, the unit and the config in phub; the
   worker packages need no DPDK, neither by their dependencies nor by their library's ELF dependencies.
3. In a private mount namespace, an overlay over / (the upper layer on a tmpfs) is a copy of this machine's
   root in which dpkg installs the packages for real: the maintainer scripts run, against the packages this
   machine has (the dependencies of the test command's tools/setup.sh). Nothing reaches the real root, and the
   namespace's mounts go when the test ends, whatever way it ends. In that root:
   `phub-server --check` on the installed default config, the unit's ExecStartPre commands (phub-boot as a
   dry run), `python3 -c "import phub.torch"` with /usr/bin/python3 from / (no PYTHONPATH: the installed
   package and library, not the source tree), man finds every page, and the unit is not enabled.
4. `dpkg --purge` of all four, then the overlay's upper layer is compared with what it held before the
   install: any file or directory left, changed or deleted outside dpkg's own records (its database and log,
   the linker cache) fails the test, and so does any change to the users and groups.

A debootstrap root was the alternative: it would download a Debian system, DPDK and python3-torch (about
1 GB) from the mirror on every run; the overlay gives the same isolation with the packages already here.

Usage: package_test.py --source ROOT --build BUILD [--keep-debs DIR]
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

PACKAGES = ["phub", "libphub-client1", "libphub-client-dev", "python3-phub"]
PROGRAMS = {"usr/bin/phub-server": "man1", "usr/bin/phub-ctl": "man1", "usr/bin/phub-probe": "man1",
            "usr/bin/phub-pktgen": "man1", "usr/bin/phub-demo-worker": "man1", "usr/sbin/phub-boot": "man8"}
UNIT = "lib/systemd/system/phub-server.service"
CONFIG = "etc/phub/phub.lua"
# What dpkg itself records about an install and a purge: its database and log, and the dynamic linker's cache
# (ldconfig runs on a library's install and removal). Nothing else may differ after the purge.
BOOKKEEPING = [r"var/lib/dpkg(/(status|status-old|available|lock|lock-frontend|info|updates|triggers(/[^/]+)?))?",
               r"var/log/dpkg\.log", r"etc/ld\.so\.cache", r"var/cache/ldconfig(/aux-cache)?"]
DPDK = re.compile(r"^(dpdk|libdpdk|librte-)")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "bench", "lib"))
from phubbench.testing import Checks  # noqa: E402  (PASS/FAIL lines and the SUBTESTS summary)


def run(cmd, timeout, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def tail(done, n=3000):
    return ("rc=%s\n%s%s" % (done.returncode, done.stdout, done.stderr))[-n:]


# ---- inside the private mount namespace --------------------------------------------------------------------

def snapshot(upper):
    """path (relative to the upper layer) -> what is there: a whiteout, a directory, a link or a file's digest."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(upper):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, upper)
            st = os.lstat(full)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out[rel] = "whiteout"
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir %o" % stat.S_IMODE(st.st_mode)
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = "link " + os.readlink(full)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    out[rel] = "file " + hashlib.sha256(f.read()).hexdigest()
            else:
                out[rel] = "special %o" % st.st_mode
    return out


def inside(a):
    """Runs as root in a private mount namespace; prints the checks as JSON lines [name, ok, detail]."""
    results = []

    def check(name, ok, detail=""):
        results.append([name, bool(ok), str(detail)[-3000:]])
        return ok

    top = a.overlay
    upper, work, root = (os.path.join(top, d) for d in ("upper", "work", "root"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "phub-package-test", top], check=True, timeout=30)
    for d in (upper, work, root):
        os.mkdir(d)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=/,upperdir=%s,workdir=%s" % (upper, work),
                    root], check=True, timeout=30)
    # The kernel's and devices' file systems as the host has them; /tmp and /run fresh and empty, so that no
    # systemd of the host is seen (the maintainer scripts then neither reload nor start units).
    subprocess.run(["mount", "-t", "proc", "proc", os.path.join(root, "proc")], check=True, timeout=30)
    for d in ("sys", "dev"):
        subprocess.run(["mount", "--rbind", "/" + d, os.path.join(root, d)], check=True, timeout=30)
    subprocess.run(["mount", "-o", "remount,bind,ro", os.path.join(root, "sys")], check=True, timeout=30)
    for d in ("tmp", "run"):
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", os.path.join(root, d)], check=True, timeout=30)
    # man-db rebuilds its whole index when a package with pages comes or goes: slow, and beside the point here
    # (`man -w` below finds the pages without it).
    auto_update = os.path.join(root, "var/lib/man-db/auto-update")
    if os.path.exists(auto_update):
        os.unlink(auto_update)
    debs = os.path.join(root, "tmp", "debs")
    shutil.copytree(a.debs, debs)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root",
           "DEBIAN_FRONTEND": "noninteractive"}

    def chroot(cmd, timeout=300, cwd="/"):
        return run(["chroot", root, "/bin/sh", "-c", "cd %s && exec \"$@\"" % cwd, "sh"] + cmd, timeout, env=env)

    before = snapshot(upper)
    users = {f: open(os.path.join(root, f), "rb").read() for f in ("etc/passwd", "etc/group", "etc/shadow")}

    t0 = time.monotonic()
    done = chroot(["dpkg", "-i"] + ["/tmp/debs/" + os.path.basename(d) for d in sorted(glob.glob(debs + "/*.deb"))])
    check("dpkg -i of the four packages in the overlay root (%.1f s)" % (time.monotonic() - t0),
          done.returncode == 0, tail(done))
    for p in PACKAGES:
        q = chroot(["dpkg-query", "-W", "-f", "${Status}", p], 60)
        check("%s is installed" % p, q.stdout == "install ok installed", tail(q))

    done = chroot(["phub-server", "--check", "--config", "/" + CONFIG], 120)
    check("phub-server --check on the installed default config /%s" % CONFIG,
          done.returncode == 0 and "config ok" in done.stdout, tail(done))

    unit = os.path.join(root, UNIT)
    pre = [l.split("=", 1)[1].split() for l in open(unit).read().splitlines() if l.startswith("ExecStartPre=")]
    pre = [[w.replace("${PHUB_CONFIG}", "/" + CONFIG) for w in cmd if w != "$PHUB_BOOT_ARGS"] for cmd in pre]
    check("the unit has its two ExecStartPre commands", len(pre) == 2, repr(pre))
    for cmd in pre:
        if os.path.basename(cmd[0]) == "phub-boot":
            cmd = cmd + ["--page-size", "2M", "--dry-run"]  # never the real thing in a test
        done = chroot(cmd, 120)
        check("the installed unit's ExecStartPre passes: %s" % " ".join(cmd), done.returncode == 0, tail(done))
    wants = glob.glob(os.path.join(root, "etc/systemd/system/*.wants/phub-server.service"))
    check("the unit is installed disabled (no .wants link)", not wants, repr(wants))

    probe = ("import phub, phub.torch, phub._lib, torch; "
             "print(phub.__file__); print(phub._lib.lib._name); print(phub.torch.HookState.__name__)")
    done = chroot(["/usr/bin/python3", "-c", probe], 300)
    lines = done.stdout.split()
    check("/usr/bin/python3 -c 'import phub.torch' from / loads the installed package and library",
          done.returncode == 0 and lines[:3] == ["/usr/lib/python3/dist-packages/phub/__init__.py",
                                                 "/usr/lib/x86_64-linux-gnu/libphub-client.so.1", "HookState"],
          tail(done))

    for prog, section in sorted(PROGRAMS.items()):
        name = os.path.basename(prog)
        done = chroot(["man", "-w", name], 60)
        want = "/usr/share/man/%s/%s.%s.gz" % (section, name, section[3:])
        check("man -w %s finds %s" % (name, want), done.returncode == 0 and done.stdout.strip() == want, tail(done))

    t0 = time.monotonic()
    done = chroot(["dpkg", "--purge"] + list(reversed(PACKAGES)))
    check("dpkg --purge of the four packages (%.1f s)" % (time.monotonic() - t0), done.returncode == 0, tail(done))
    for p in PACKAGES:
        q = chroot(["dpkg-query", "-W", "-f", "${Status}", p], 60)
        check("%s is gone from dpkg's database" % p, q.returncode != 0 or q.stdout.startswith("unknown"), tail(q))
    info = glob.glob(os.path.join(root, "var/lib/dpkg/info/*phub*"))
    check("no maintainer script or file list of the packages is left", not info, repr(info))
    for path in [UNIT, CONFIG, "etc/phub", "usr/share/phub", "usr/share/doc/phub", "usr/lib/python3/dist-packages/phub",
                 "var/lib/systemd/deb-systemd-helper-enabled/phub-server.service.dsh-also"] + list(PROGRAMS):
        check("/%s is gone" % path, not os.path.lexists(os.path.join(root, path)))

    shutil.rmtree(debs)
    after = snapshot(upper)
    bookkeeping = re.compile("^(%s)$" % "|".join(BOOKKEEPING))
    left = sorted("%s (%s -> %s)" % (p, before.get(p, "absent"), after.get(p, "absent"))
                  for p in set(before) | set(after)
                  if before.get(p) != after.get(p) and not bookkeeping.match(p)
                  # a directory of the host that a file went into and out of again stays in the upper layer
                  and not (after.get(p, "").startswith("dir") and before.get(p) is None and
                           os.path.isdir(os.path.join("/", p)) and
                           after[p] == "dir %o" % stat.S_IMODE(os.lstat(os.path.join("/", p)).st_mode)))
    check("after the purge the root is as before the install, but dpkg's records (%d paths differ in all)"
          % sum(1 for p in set(before) | set(after) if before.get(p) != after.get(p)),
          not left, "left behind or changed:\n" + "\n".join(left[:60]))
    for f, text in users.items():
        check("/%s is unchanged (no user or group was added)" % f, open(os.path.join(root, f), "rb").read() == text)
    print(json.dumps(results), flush=True)
    return 0


# ---- outside -----------------------------------------------------------------------------------------------

def deb_field(deb, field):
    return run(["dpkg-deb", "-f", deb, field], 60).stdout.strip()


def deb_files(deb):
    out = run(["dpkg-deb", "-c", deb], 60).stdout
    return {re.sub(r"^\./", "", l.split()[-1] if " -> " not in l else l.split(" -> ")[0].split()[-1]).rstrip("/")
            for l in out.splitlines()}


def depends_names(text):
    return [re.split(r"[\s(:]", alt.strip())[0] for dep in text.split(",") if dep.strip() for alt in dep.split("|")]


def closure(names):
    """Every package the names depend on, recursively (Depends and Pre-Depends), from apt's cache."""
    done = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                "--no-breaks", "--no-replaces", "--no-enhances"] + names, 300)
    deps = set()
    for line in done.stdout.splitlines():
        m = re.match(r"^\s*\|?(?:Pre)?Depends: <?([^>\s]+)>?", line)
        if m:
            deps.add(m.group(1).split(":")[0])
    return deps, done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--overlay", help=argparse.SUPPRESS)
    ap.add_argument("--debs", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inside:
        return inside(a)
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: stopped by SIGTERM (meson's timeout)"))
    t = Checks("Debian packages: build, lintian, install, use and purge")
    check = t.check
    if os.geteuid() != 0:
        check("the package test runs as root (dpkg, mount namespaces, chroot)", False)
        return t.done()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="phub-package-") as tmp:
        debs = os.path.join(tmp, "debs")  # what tools/package.sh writes
        install = os.path.join(tmp, "install")  # the four packages the overlay root installs
        t0 = time.monotonic()
        done = run(["nice", "-n", "19", os.path.join(a.source, "tools", "package.sh"), "--no-lintian",
                    "--work", os.path.join(a.build, "package"), "--out", debs], 3000)
        built = time.monotonic() - t0
        print(done.stdout[-1500:], flush=True)
        # The four packages, and the -dbgsym packages of the two with binaries (debhelper's detached symbols).
        found = {deb_field(d, "Package"): d for d in glob.glob(os.path.join(debs, "*.deb"))}
        dbgsym = sorted(p for p in found if p.endswith("-dbgsym"))
        if not check("tools/package.sh builds %s (%.0f s), and %s" % (", ".join(PACKAGES), built, ", ".join(dbgsym)),
                     done.returncode == 0 and set(PACKAGES) <= set(found),
                     "built %s\n%s" % (sorted(found), tail(done, 6000))):
            return t.done()

        t0 = time.monotonic()
        lint = run(["lintian", "--info", "--display-info"] + sorted(found.values()), 900)
        tags = [l for l in lint.stdout.splitlines() if re.match(r"^[EWIPX]: ", l)]  # N: lines explain them
        print("lintian (%.0f s), %d tag(s):" % (time.monotonic() - t0, len(tags)), flush=True)
        for l in lint.stdout.splitlines():
            print("  " + l, flush=True)
        errors = [l for l in tags if l.startswith("E: ")]
        # lintian's status: 0 nothing at or above its fail level (error), 1 tags at that level, 2 it failed.
        check("lintian ran on the %d packages (status %d)" % (len(found), lint.returncode), lint.returncode in (0, 1),
              tail(lint))
        check("lintian reports no error (%d warning(s), %d info tag(s))"
              % (sum(l.startswith("W: ") for l in tags), sum(l.startswith("I: ") for l in tags)),
              not errors and lint.returncode == 0, "\n".join(errors))

        files = {p: deb_files(found[p]) for p in PACKAGES}
        for prog, section in sorted(PROGRAMS.items()):
            name = os.path.basename(prog)
            check("phub holds /%s and its page %s/%s" % (prog, section, name),
                  prog in files["phub"] and "usr/share/man/%s/%s.%s.gz" % (section, name, section[3:]) in files["phub"])
        for path in (UNIT, CONFIG, "usr/share/phub/examples/rack.lua", "usr/share/doc/phub/README.md",
                     "usr/share/doc/phub/docs/server.md"):
            check("phub holds /%s" % path, path in files["phub"])
        check("python3-phub holds the package phub under /usr/lib/python3/dist-packages",
              "usr/lib/python3/dist-packages/phub/torch.py" in files["python3-phub"] and
              "usr/lib/python3/dist-packages/phub/_libpath.py" in files["python3-phub"])
        check("libphub-client1 holds libphub-client.so.1",
              "usr/lib/x86_64-linux-gnu/libphub-client.so.1" in files["libphub-client1"])
        check("libphub-client-dev holds phub/client.h", "usr/include/phub/client.h" in files["libphub-client-dev"])

        # The worker side needs no DPDK: not in its packages' dependencies, recursively, nor in the ELF.
        worker = ["libphub-client1", "python3-phub"]
        direct = set()
        for p in worker:
            direct |= set(depends_names(deb_field(found[p], "Depends") + "," + deb_field(found[p], "Pre-Depends")))
        direct -= set(PACKAGES)
        deps, done = closure(sorted(direct))
        check("the worker packages' dependencies resolve (%d packages, recursively)" % len(deps),
              done.returncode == 0 and deps, tail(done))
        dpdk = sorted(d for d in deps | direct if DPDK.match(d))
        check("no DPDK package among the worker packages' dependencies", not dpdk, repr(dpdk))
        phub_deps = depends_names(deb_field(found["phub"], "Depends"))
        check("phub itself depends on DPDK (the control: the check above can see it)",
              any(DPDK.match(d) for d in phub_deps), repr(phub_deps))
        x = os.path.join(tmp, "client")
        run(["dpkg-deb", "-x", found["libphub-client1"], x], 60)
        elf = run(["readelf", "-d", os.path.join(x, "usr/lib/x86_64-linux-gnu/libphub-client.so.1")], 60)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", elf.stdout)
        check("libphub-client.so.1 needs no DPDK library (NEEDED: %s)" % ", ".join(needed),
              needed and not any(n.startswith("librte_") for n in needed), tail(elf))

        # Install, use and purge in an overlay of this machine's root.
        os.mkdir(install)
        for p in PACKAGES:
            shutil.copy(found[p], install)
        overlay = os.path.join(tmp, "overlay")
        os.mkdir(overlay)
        t0 = time.monotonic()
        inner = run(["unshare", "--mount", "--propagation", "private", "--", "/usr/bin/python3",
                     os.path.abspath(__file__), "--source", a.source, "--build", a.build, "--inside",
                     "--overlay", overlay, "--debs", install], 1200)
        try:
            results = json.loads(inner.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            results = [["the install, use and purge in an overlay root ran", False, tail(inner, 6000)]]
        for name, ok, detail in results:
            check(name, ok, detail)
        print("install, use and purge in the overlay root: %.0f s" % (time.monotonic() - t0), flush=True)
        check("the overlay's mount point is empty again (the namespace's mounts went with it)",
              os.path.isdir(overlay) and not os.listdir(overlay), repr(os.listdir(overlay)))
    print("package test: %.0f s in all (the package build %.0f s)" % (time.monotonic() - started, built), flush=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""`meson install --destdir` puts phub where an operator expects it: the binaries, phub-boot, the systemd unit in
systemd's unit directory for the prefix, the default config (kept on a second install after an edit), the
examples and docs, libphub-client and the Python package `phub`.

Then, in a private mount namespace where the installed tree is bind-mounted over the prefix (so the unit's paths
are the real installed files, and nothing outside the namespace sees it), `systemd-analyze verify` must accept
the installed unit with no warning, the unit's own ExecStartPre commands must pass on the installed default
config (phub-boot as a dry run), and a plain `import phub` must find the installed package and library.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import Checks, unwind_on_sigterm


def options(build):
    out = subprocess.run(["meson", "introspect", build, "--buildoptions"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return {o["name"]: o["value"] for o in json.loads(out)}


def install(build, destdir):
    return subprocess.run(["meson", "install", "-C", build, "--destdir", destdir, "--no-rebuild"],
                          capture_output=True, text=True, timeout=300)


def site_dir_of(destdir):
    """The directory (inside destdir) that holds the installed package phub/, or None."""
    for root, _, files in os.walk(destdir):
        if os.path.basename(root) == "phub" and "__init__.py" in files and "_libpath.py" in files:
            return os.path.dirname(root)
    return None


def unit_commands(unit, key, env):
    """The unit's KEY= command lines, with ${VAR} and $VAR taken from env (unset: empty), split into words."""
    out = []
    for line in open(unit):
        if line.startswith(key + "="):
            text = line[len(key) + 1:].strip()
            text = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), text)
            out.append(text.split())
    return out


def inside(args):
    """Runs in the private mount namespace: the installed prefix is bind-mounted over the real one."""
    results = []

    def check(name, ok, detail=""):
        results.append([name, bool(ok), detail])

    subprocess.run(["mount", "--bind", args.destdir + args.prefix, args.prefix], check=True, timeout=30)
    verify = subprocess.run(["systemd-analyze", "verify", args.unit], capture_output=True, text=True, timeout=60)
    check("systemd-analyze verify accepts the installed unit, with no warning",
          verify.returncode == 0 and not (verify.stdout + verify.stderr).strip(),
          f"rc={verify.returncode}\n{verify.stdout}{verify.stderr}")

    env = {"PHUB_CONFIG": args.config, "PHUB_BOOT_ARGS": ""}
    pre = unit_commands(args.unit, "ExecStartPre", env)
    check("the unit has two ExecStartPre commands (check, boot)", len(pre) == 2, repr(pre))
    for cmd in pre:
        if os.path.basename(cmd[0]) == "phub-boot":
            cmd = cmd + ["--page-size", "2M", "--dry-run"]  # never the real thing in a test
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        check(f"the unit's ExecStartPre passes on the installed default config: {' '.join(cmd)}",
              done.returncode == 0, f"rc={done.returncode}\n{done.stdout}{done.stderr}")
    start = unit_commands(args.unit, "ExecStart", env)
    check("ExecStart runs the installed server on the installed config",
          start == [[os.path.join(args.prefix, args.bindir, "phub-server"), "--config", args.config]], repr(start))

    py = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PHUB_CLIENT_LIB")}
    probe = ("import phub, phub._libpath, phub._lib; "
             "print(phub.__file__); print(phub._libpath.LIBRARY); print(phub._lib.lib._name)")
    done = subprocess.run(["/usr/bin/python3", "-c", probe], capture_output=True, text=True, env=py, timeout=60)
    lines = done.stdout.split()
    check("import phub, with no PYTHONPATH, finds the installed package and loads the installed libphub-client",
          done.returncode == 0 and len(lines) == 3 and lines[0].startswith(args.site) and
          lines[1] == lines[2] == os.path.join(args.prefix, args.libdir, "libphub-client.so.1"),
          f"rc={done.returncode}\n{done.stdout}{done.stderr}")
    print(json.dumps(results))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    for a in ("--destdir", "--prefix", "--unit", "--config", "--site", "--bindir", "--libdir"):
        ap.add_argument(a, help=argparse.SUPPRESS)
    args = ap.parse_args()
    unwind_on_sigterm()
    if args.inside:
        return inside(args)

    check = Checks()
    o = options(args.build)
    prefix = o["prefix"]

    def under(*parts):
        return os.path.join(prefix, *parts)

    def sysconf(*parts):
        return os.path.join(under(o["sysconfdir"]), *parts)  # an absolute sysconfdir (/etc) stays absolute

    unit_dir = o["systemdunitdir"] or under("lib", "systemd", "system")
    with tempfile.TemporaryDirectory(prefix="phub-install-") as destdir:
        done = install(args.build, destdir)
        if not check("meson install --destdir", done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]):
            return check.summary()

        def installed(path, executable=False):
            full = destdir + path
            return os.path.isfile(full) and (not executable or os.access(full, os.X_OK))

        for name in ("phub-server", "phub-ctl", "phub-pktgen", "phub-probe", "phub-demo-worker"):
            check(f"{under(o['bindir'], name)} is installed, executable", installed(under(o["bindir"], name), True))
        check(f"{under(o['sbindir'], 'phub-boot')} is installed, executable",
              installed(under(o["sbindir"], "phub-boot"), True))
        unit = os.path.join(unit_dir, "phub-server.service")
        check(f"{unit} is installed", installed(unit))
        default = under(o["datadir"], "phub", "phub.lua")
        config = sysconf("phub", "phub.lua")
        check(f"{config} is installed, equal to {default}", installed(config) and installed(default) and
              open(destdir + config).read() == open(destdir + default).read())
        for ex in ("rack.lua", "two-rack.lua", "racks.lua", "tenants.lua"):
            check(f"example {ex} is installed", installed(under(o["datadir"], "phub", "examples", ex)))
        for doc in ("README.md", "docs/server.md", "docs/config.md", "docs/ctl.md"):
            check(f"doc {doc} is installed", installed(under(o["datadir"], "doc", "phub", doc)))
        check("libphub-client.so.1 and its header are installed",
              os.path.exists(destdir + under(o["libdir"], "libphub-client.so.1")) and
              installed(under(o["includedir"], "phub", "client.h")))

        site = site_dir_of(destdir)
        check("the Python package phub is installed", site is not None)
        if site is None:
            return check.summary()
        real_site = site[len(destdir):]
        sys_path = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                                  capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=60).stdout
        check(f"its site dir {real_site} is on /usr/bin/python3's path (import phub needs no PYTHONPATH)",
              real_site in sys_path.split("\n"), sys_path)
        env = dict(os.environ, PYTHONPATH=site,
                   PHUB_CLIENT_LIB=destdir + under(o["libdir"], "libphub-client.so.1"))
        done = subprocess.run(["/usr/bin/python3", "-c", "import phub; print(phub.__file__); phub.Client"],
                              capture_output=True, text=True, env=env, timeout=60)
        check("import phub works with PYTHONPATH at the installed site dir",
              done.returncode == 0 and done.stdout.startswith(site), done.stdout + done.stderr)

        # An upgrade keeps the operator's config: install again over an edited one.
        with open(destdir + config, "a") as f:
            f.write("-- edited by the operator\n")
        done = install(args.build, destdir)
        check("a second install keeps an edited config",
              done.returncode == 0 and open(destdir + config).read().endswith("-- edited by the operator\n"),
              done.stdout[-2000:] + done.stderr[-2000:])
        with open(destdir + config, "w") as f:
            f.write(open(destdir + default).read())

        if prefix in ("/", "/usr") or not os.path.isdir(prefix):
            check(f"prefix {prefix} can be bind-mounted for the namespace checks (use /usr/local or the like)", False)
            return check.summary()
        inner = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "/usr/bin/python3", os.path.abspath(__file__),
             "--build", args.build, "--inside", "--destdir", destdir, "--prefix", prefix, "--unit", unit,
             "--config", config, "--site", real_site, "--bindir", o["bindir"], "--libdir", o["libdir"]],
            capture_output=True, text=True, timeout=240)
        try:
            results = json.loads(inner.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            results = [["the checks in a private mount namespace ran", False, inner.stdout + inner.stderr]]
        for name, ok, detail in results:
            check(name, ok, detail)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

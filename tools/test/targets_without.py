#!/usr/bin/python3
"""Print the outputs of a configured meson build's targets, but not the test binaries that only given suites run.

Usage: targets_without.py BUILD_DIR SUITE...   (e.g. unit dpdk)

A target is left out when a test of one of the SUITEs runs it or depends on it, and no test of another suite
does. Everything else is printed (libraries, programs, generated files, the binaries of other suites); ninja
builds what those need. tools/test.sh builds its release tree with these: the unit and dpdk suites run in the
ASan+UBSan tree, so the release tree does not compile their binaries a second time (the checks that only a build
without sanitizers can make are in the suite `release`, which it runs). One path per line, relative to BUILD_DIR.
"""
import json
import os
import subprocess
import sys


def introspect(build, what):
    done = subprocess.run(["meson", "introspect", what, build], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("targets_without: meson introspect %s %s failed: %s" % (what, build, done.stderr.strip()))
    return json.loads(done.stdout)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    build = os.path.abspath(argv[1])
    left_out_suites = set(argv[2:])
    targets = introspect(build, "--targets")
    by_file = {f: t["id"] for t in targets for f in t["filename"]}
    used_by_left_out, used_by_others = set(), set()
    for test in introspect(build, "--tests"):
        ids = set(test["depends"]) | {by_file[a] for a in test["cmd"] if a in by_file}
        suites = {s.split(":")[-1] for s in test["suite"]}  # "project:suite"
        (used_by_others if suites - left_out_suites else used_by_left_out).update(ids)
    skip = used_by_left_out - used_by_others
    outputs = [os.path.relpath(f, build) for t in targets if t["type"] != "run" and t["id"] not in skip
               for f in t["filename"]]
    if not outputs:
        print("targets_without: no target left to build in " + build, file=sys.stderr)
        return 1
    print("\n".join(outputs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

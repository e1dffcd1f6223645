#!/usr/bin/python3
"""Sum meson test logs into per-suite counts and one final line `N passed, N failed`.

A gtest binary counts its test cases; any other test counts its `SUBTESTS passed=N failed=M` line if it
prints one, else one case. A test meson did not pass (fail, timeout, skip, crash) always adds a failure,
so a suite that cannot run is never silently skipped.
"""
import json
import re
import sys
from collections import defaultdict

PASSED = re.compile(r"^\[  PASSED  \] (\d+) tests?\.", re.M)
FAILED = re.compile(r"^\[  FAILED  \] (\d+) tests?, listed below", re.M)
OK_LINE = re.compile(r"^\[       OK \] ", re.M)
SUBTESTS = re.compile(r"^SUBTESTS passed=(\d+) failed=(\d+)\s*$", re.M)


def count(entry):
    out = entry.get("stdout") or ""
    meson_ok = entry.get("result") == "OK"
    passed = failed = 0
    sub = SUBTESTS.findall(out)
    if PASSED.search(out) or FAILED.search(out) or OK_LINE.search(out):
        m = PASSED.search(out)
        passed = int(m.group(1)) if m else len(OK_LINE.findall(out))
        f = FAILED.search(out)
        failed = int(f.group(1)) if f else 0
    elif sub:
        passed, failed = int(sub[-1][0]), int(sub[-1][1])
    else:
        passed = 1 if meson_ok else 0
    if not meson_ok and failed == 0:
        failed = 1
    return passed, failed


def main(argv):
    totals = defaultdict(lambda: [0, 0])
    failures = []
    for arg in argv[1:]:
        label, _, path = arg.partition("=")
        try:
            lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
        except OSError as e:
            print(f"summary: {label}: cannot read {path}: {e}")
            totals[label][1] += 1
            continue
        if not any(line.strip() for line in lines):
            print(f"summary: {label}: no tests ran")
            totals[label][1] += 1
            failures.append(f"{label}: suite empty")
        for line in lines:
            if not line.strip():
                continue
            entry = json.loads(line)
            p, f = count(entry)
            key = label
            totals[key][0] += p
            totals[key][1] += f
            if f:
                failures.append(f"{key}: {entry['name']} ({entry.get('result')})")
    for key in sorted(totals):
        p, f = totals[key]
        print(f"summary: {key}: {p} passed, {f} failed")
    for name in failures:
        print(f"summary: FAILED {name}")
    tp = sum(v[0] for v in totals.values())
    tf = sum(v[1] for v in totals.values())
    print(f"{tp} passed, {tf} failed")
    return 0 if tf == 0 and tp > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

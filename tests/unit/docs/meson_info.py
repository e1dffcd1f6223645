"""What the docs tests share: phubbench's named checks, their arguments, and what `meson introspect` says of a
build."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "bench", "lib"))
from phubbench.testing import Checks  # noqa: E402,F401  (PASS/FAIL lines and the SUBTESTS summary)


def introspect(build, what):
    """`meson introspect BUILD WHAT` (--installed, --buildoptions, --projectinfo), parsed."""
    out = subprocess.run(["meson", "introspect", build, what], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    return json.loads(out)


def arguments():
    """--build BUILD (the meson build directory) and --source ROOT (the checkout), both required."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    return ap.parse_args()

"""Make sure the executables a benchmark needs are built (meson setup once, then ninja)."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
TARGETS = {"server": "app/phub-server/phub-server", "pktgen": "tools/phub-pktgen/phub-pktgen"}


def ensure(build_dir=None):
    """Returns {'server': path, 'pktgen': path}; BUILD_DIR (default <repo>/build) is configured if needed."""
    build = os.path.abspath(build_dir or os.environ.get("BUILD_DIR") or os.path.join(ROOT, "build"))
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, ROOT], check=True, stdout=sys.stderr)
    subprocess.run(["ninja", "-C", build] + list(TARGETS.values()), check=True, stdout=sys.stderr)
    return {k: os.path.join(build, v) for k, v in TARGETS.items()}

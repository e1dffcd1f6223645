"""What the hierarchy's system tests share: livenet's start (--build, SIGTERM unwinding, named checks, root)
and the testbed's check that the kernel and tools have what it needs (tools/testbed/testbed.py)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "testbed"))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import livenet  # noqa: E402
import testbed  # noqa: E402


def begin():
    """(build_dir, checks, ready): ready is False, with a failed check saying why, without root or when the
    kernel lacks what the testbed needs; the caller then returns checks.summary()."""
    build, check, root = livenet.begin()
    if not root:
        return build, check, False
    lacks = testbed.kernel_lacks()
    return build, check, check("the kernel and tools have what the testbed needs", not lacks,
                               "missing: %s" % ", ".join(lacks))

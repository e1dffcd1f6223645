#!/usr/bin/python3
"""DPDK test: phub-server removes its own EAL runtime directory (/var/run/dpdk/<file prefix>) when it exits
(rte_eal_cleanup leaves it), also when it refuses to run after the EAL started, and leaves the directory of
another phub-server running beside it with another prefix. The harnesses' removal of a killed process's
directory keeps to the same rules."""
import os
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import procs, server, testing  # noqa: E402


def runtime_dir(prefix):
    return os.path.join(procs.DPDK_RUNTIME, prefix)


def write_config(d, prefix):
    cfg = os.path.join(d, prefix + ".lua")
    server.config(cfg, prefix=prefix, device=server.memif_device(os.path.join(d, prefix + ".sock")),
                  jobs=[server.job(1, "j", 2, 1000)])
    return cfg


def side_by_side(a, t, d):
    short, long = "phubrt-a-%d" % os.getpid(), "phubrt-b-%d" % os.getpid()
    with procs.Cleanup() as c:
        c.add(prefix=short)
        c.add(prefix=long)
        first = server.start(a.server, write_config(d, short), short, c, duration=2)
        second = server.start(a.server, write_config(d, long), long, c, duration=6)
        t.check("while both run, each has its runtime directory",
                os.path.isdir(runtime_dir(short)) and os.path.isdir(runtime_dir(long)))
        t.equal("the first server ends after its duration", first.wait(30), 0)
        t.check("the first server's directory is gone after its exit", not os.path.lexists(runtime_dir(short)),
                str(os.listdir(runtime_dir(short)) if os.path.isdir(runtime_dir(short)) else ""))
        t.check("the second server (running) keeps its directory and its files",
                second.p.poll() is None and os.path.isfile(os.path.join(runtime_dir(long), "config")))
        t.equal("the second server ends after its duration", second.wait(30), 0)
        t.check("the second server's directory is gone after its exit", not os.path.lexists(runtime_dir(long)))
        t.check("neither server reports a directory it could not remove",
                all("runtime directory" not in p.stderr() for p in (first, second)), first.stderr() + second.stderr())


def refused_after_eal(a, t, d):
    """An EAL argument that is not an option: the EAL starts, then phub-server refuses and exits 1."""
    prefix = "phubrt-c-%d" % os.getpid()
    with procs.Cleanup() as c:
        c.add(prefix=prefix)
        started = time.time()
        status, out, err = procs.run([a.server, "--config", write_config(d, prefix), "--duration", "1", "--",
                                      "not-an-eal-option"], 60)
        t.equal("a server refused after the EAL started exits 1", status, 1)
        t.check("its message names the word", "not-an-eal-option" in err, err[-400:])
        t.check("its runtime directory is gone (%.1f s)" % (time.time() - started),
                not os.path.lexists(runtime_dir(prefix)))


def harness_removal(t, d):
    """The harnesses' removal of a killed process's directory (procs.remove_runtime_dir, phubnet's too): the
    tree goes, links in it go as links, a link in the directory's place stays, a path is not a prefix."""
    keep = os.path.join(d, "keep")
    open(keep, "w").close()
    tree, link = "phubrt-d-%d" % os.getpid(), "phubrt-e-%d" % os.getpid()
    os.makedirs(os.path.join(runtime_dir(tree), "sub"))
    open(os.path.join(runtime_dir(tree), "sub", "config"), "w").close()
    os.symlink(d, os.path.join(runtime_dir(tree), "link"))
    os.symlink(d, runtime_dir(link))
    try:
        t.check("a killed process's directory is removed", procs.remove_runtime_dir(tree) and
                not os.path.lexists(runtime_dir(tree)))
        t.check("a link in the directory's place is left", procs.remove_runtime_dir(link) is False and
                os.path.islink(runtime_dir(link)))
        t.check("what the links point to is kept", os.path.isfile(keep))
        try:
            procs.remove_runtime_dir("../" + os.path.basename(d))
            t.check("a path is refused as a prefix", False)
        except ValueError:
            t.check("a path is refused as a prefix", os.path.isfile(keep))
    finally:
        if os.path.islink(runtime_dir(link)):
            os.unlink(runtime_dir(link))


def body(a, t):
    with tempfile.TemporaryDirectory(prefix="phub-rtdir-") as d:
        side_by_side(a, t, d)
        refused_after_eal(a, t, d)
        harness_removal(t, d)


if __name__ == "__main__":
    sys.exit(testing.main("runtime directory: removed at exit, the other process's kept", body))

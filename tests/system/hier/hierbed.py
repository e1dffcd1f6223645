"""What the hierarchy's system tests share: livenet's start (--build, SIGTERM unwinding, named checks, root)
and the testbed's check that the kernel and tools have what it needs (tools/testbed/testbed.py)."""
import os
import signal
import subprocess
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


def stop_servers(net, servers, logs):
    """SIGINT to every phub-server of `servers` ({name: (namespace, process)}, started with net.launch_server),
    then its counters from the log it wrote (`logs`: {name: path}). Returns ({name: exit status, None if it
    did not stop within 30 s}, {name: counters as phubnet.parse_counters reads them})."""
    rcs = {}
    for name, (ns, p) in servers.items():
        net.signal_server(signal.SIGINT, ns)
        try:
            rcs[name] = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rcs[name] = None
    return rcs, {name: livenet.phubnet.parse_counters(open(logs[name]).read()) for name in servers}


def forwarded_both_ways(job_counters):
    """Whether every hub ({name: one job's counters}) sent and received partials and hub results."""
    return all(c.get("partials_sent", 0) > 0 and c.get("partials_received", 0) > 0 and
               c.get("hub_results_sent", 0) > 0 and c.get("hub_results_received", 0) > 0
               for c in job_counters.values())


def tear_down(check, net, logs, eal_prefixes):
    """The `finally` of a test that started servers with net.launch_server: the tail of every server's log
    (`logs`: {name: path}) when a check failed, then net.down() and the EAL runtime directories of the file
    prefixes in `eal_prefixes` (a server that had to be killed leaves its own)."""
    if check.failed:
        for name, path in logs.items():
            if os.path.exists(path):
                print("%s log tail:\n%s" % (name, open(path).read()[-3000:]), flush=True)
    net.down()
    for prefix in eal_prefixes:
        livenet.phubnet.remove_runtime_dir(prefix)

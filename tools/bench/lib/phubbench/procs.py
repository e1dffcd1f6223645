"""Processes with deadlines: start, wait for a readiness line, stop cleanly, always clean up."""
import os
import shutil
import signal
import subprocess
import threading
import time

DPDK_RUNTIME = "/var/run/dpdk"


class Proc:
    """A child process whose stdout and stderr are collected by background threads."""

    def __init__(self, argv, name, env=None, stdin_pipe=False):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.out, self.err = [], []
        self._ready = threading.Event()
        self._ready_text = None
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                  stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                                  start_new_session=True)
        self._threads = [threading.Thread(target=self._pump, args=(self.p.stdout, self.out), daemon=True),
                         threading.Thread(target=self._pump, args=(self.p.stderr, self.err), daemon=True)]
        for t in self._threads:
            t.start()

    def _pump(self, stream, sink):
        for line in stream:
            sink.append(line)
            if self._ready_text and self._ready_text in line:
                self._ready.set()

    def wait_for(self, text, timeout):
        """True once a line containing `text` appeared (on either stream) within `timeout` seconds."""
        self._ready.clear()  # set by an earlier wait's text, it would answer for this one
        self._ready_text = text
        if any(text in line for line in self.out + self.err):
            return True
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self._ready.wait(0.05):
                return True
            if self.p.poll() is not None:
                time.sleep(0.1)
                return any(text in line for line in self.out + self.err)
        return False

    def stop(self, timeout=15):
        """SIGTERM, then (after `timeout`) diagnose and SIGKILL; returns the exit status."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def diagnose(self):
        """A hung process: record its threads' states and stacks (gdb, if there) before it is killed."""
        lines = ["%s (pid %d) did not finish in time; its threads:\n" % (self.name, self.p.pid)]
        for tid in sorted(os.listdir("/proc/%d/task" % self.p.pid)) if os.path.isdir("/proc/%d" % self.p.pid) else []:
            try:
                with open("/proc/%d/task/%s/stat" % (self.p.pid, tid)) as f:
                    stat = f.read().split()
                with open("/proc/%d/task/%s/wchan" % (self.p.pid, tid)) as f:
                    wchan = f.read()
                lines.append("  thread %s %s state %s wchan %s\n" % (tid, stat[1], stat[2], wchan))
            except OSError:
                pass
        if shutil.which("gdb"):
            try:
                r = subprocess.run(["gdb", "-batch", "-p", str(self.p.pid), "-ex", "thread apply all bt 12"],
                                   capture_output=True, text=True, timeout=30)
                lines.append(r.stdout[-6000:])
            except (OSError, subprocess.TimeoutExpired):
                lines.append("  (gdb did not answer)\n")
        self.err.extend(lines)
        print("".join(lines), flush=True)

    def kill(self):
        os.killpg(self.p.pid, signal.SIGKILL)
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            print("%s (pid %d) survives SIGKILL for 30 s" % (self.name, self.p.pid), flush=True)

    def wait(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.diagnose()
            self.kill()
        for t in self._threads:
            t.join(5)
        return self.p.returncode

    def stdout(self):
        return "".join(self.out)

    def stderr(self):
        return "".join(self.err)


def run(argv, timeout, env=None):
    """Run to completion with a hard timeout; returns (status, stdout, stderr). Status -9 on timeout."""
    p = Proc(argv, os.path.basename(str(argv[0])), env)
    return p.wait(timeout), p.stdout(), p.stderr()


def remove_runtime_dir(prefix):
    """Removes DPDK_RUNTIME/<prefix>, the runtime directory of an EAL started with --file-prefix `prefix` that
    could not remove it itself (killed with SIGKILL; one that exits removes its own). Only for a prefix the
    caller made; the prefix must be one plain path component, and a symbolic link in the directory's place is
    left alone (rmtree follows no link: those inside go as links). True if the directory is gone."""
    if not prefix or prefix in (".", "..") or "/" in prefix:
        raise ValueError("not an EAL file prefix: %r" % prefix)
    path = os.path.join(DPDK_RUNTIME, prefix)
    if os.path.islink(path):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


class Cleanup:
    """Context manager: stop every registered process and remove DPDK runtime dirs, whatever happens."""

    def __init__(self):
        self.procs, self.prefixes = [], []

    def __enter__(self):
        return self

    def add(self, proc=None, prefix=None):
        if proc is not None:
            self.procs.append(proc)
        if prefix is not None:
            self.prefixes.append(prefix)
        return proc

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                p.stop(10)
            except Exception:  # noqa: BLE001 - cleanup must go on
                pass
        for prefix in self.prefixes:
            remove_runtime_dir(prefix)
        return False


def busy_fraction(seconds=0.5):
    """The fraction of all CPUs' time spent busy over `seconds` (from /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(max_busy=0.25, timeout=20):
    """Benchmarks share the machine with other work: wait (at most `timeout` s) until the CPUs are mostly
    idle before a measurement starts. Returns the busy fraction seen last (a measurement that had to start
    on a busy machine says so in its JSON)."""
    deadline = time.time() + timeout
    busy = busy_fraction()
    while busy > max_busy and time.time() < deadline:
        time.sleep(2)
        busy = busy_fraction()
    return busy

#!/usr/bin/python3
"""phub-server speaks systemd's notify protocol on a real NOTIFY_SOCKET that this test owns (a datagram socket
with SO_PASSCRED, as systemd's): READY=1 only after the server has said `phub: ready` (ports started, lcores
running), WATCHDOG=1 at about half of WATCHDOG_USEC and none when the watchdog is another process's, STOPPING=1
on SIGTERM, and nothing at all from `--check` or from a start that fails. The server runs on net_ring with
--no-huge --no-pci.

--reload runs only the reload case instead: SIGHUP must give RELOADING=1 then READY=1, for a good config and
for one that fails validation (meson registers it as boot-reload).
"""
import argparse
import os
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from checks import Checks, unwind_on_sigterm

CONFIG = """
return {{
  eal_args = "--no-huge --no-pci -m 256 --file-prefix {prefix} --lcores 0@0,1@1 --log-level lib.eal:warning",
  ports = {{ {{ name = "p0", device = "{device}", ipv4 = "198.18.9.1/24", steering = "ring" }} }},
  lcores = {{ {{ id = 1 }} }},
  polling = {{ idle_polls_before_sleep = 100, idle_sleep_us = 200 }},
  jobs = {{ {{ id = 1, name = "t", workers = {workers}, port_base = 41000, insecure = true, quota_bytes = "8MiB",
             keys = {{ {{ name = "w", elems = 1000 }} }} }} }},
  limits = {{ mbufs = 4095 }},
  control = {{ socket_path = "/tmp/{prefix}.ctl.sock", metrics_address = "127.0.0.1:0" }},
}}
"""
WATCHDOG_USEC = 600_000
UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Session:
    """One phub-server run with NOTIFY_SOCKET on a socket of this test: its stdout and its messages, in order."""

    count = 0

    def __init__(self, server, tmp, device="net_ring0", env=None, args=(), workers=1):
        Session.count += 1
        n = Session.count
        self.config = os.path.join(tmp, f"server-{n}.lua")
        self.prefix = f"phub-notify-{os.getpid()}-{n}"
        self.write_config(device, workers)
        self.path = os.path.join(tmp, f"notify-{n}.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "WATCHDOG_"))}
        full_env["NOTIFY_SOCKET"] = self.path
        full_env.update(env or {})
        self.proc = subprocess.Popen([server, "--config", self.config, "--duration", "60", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.out = ""
        self.eof = False
        self.messages = []  # dicts: the fields, plus "_t" (monotonic), "_pid" (sender) and "_out" (stdout then)

    def write_config(self, device, workers):
        with open(self.config, "w") as f:
            f.write(CONFIG.format(prefix=self.prefix, device=device, workers=workers))

    def _read_stdout(self):
        while not self.eof:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
            self.out += chunk.decode(errors="replace")

    def _read_messages(self):
        while True:
            try:
                data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(UCRED.size))
            except BlockingIOError:
                return
            pid = None
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = UCRED.unpack(value[:UCRED.size])[0]
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            fields.update(_t=time.monotonic(), _pid=pid, _out=self.out)
            self.messages.append(fields)

    def pump(self, until, timeout):
        """Collects stdout and messages until until() holds or timeout seconds pass; returns whether it held."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0 or (self.eof and self.proc.poll() is not None and not self._pending()):
                return until()
            select.select([self.sock] + ([] if self.eof else [self.proc.stdout]), [], [], min(left, 0.05))
            # stdout first: whatever the server wrote before sending a message is read before that message.
            self._read_stdout()
            self._read_messages()
        return True

    def _pending(self):
        return bool(select.select([self.sock], [], [], 0)[0])

    def first(self, key, after=None):
        """The first message with key=1 (after the message `after`, if given), or None."""
        start = 0 if after is None else self.messages.index(after) + 1
        return next((m for m in self.messages[start:] if m.get(key) == "1"), None)

    def wait_for(self, key, timeout, after=None):
        self.pump(lambda: self.first(key, after) is not None, timeout)
        return self.first(key, after)

    def stop(self, timeout=30):
        """SIGTERM; collects everything until the process has exited. Returns its exit status (None: hung)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.pump(lambda: self.eof and self.proc.poll() is not None, timeout)
        return self.proc.poll()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.sock.close()
        os.unlink(self.path)
        # The EAL's runtime directory of this run's --file-prefix (root's; others' live under XDG_RUNTIME_DIR).
        runtime = ("/var/run/dpdk" if os.geteuid() == 0
                   else os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "dpdk"))
        shutil.rmtree(os.path.join(runtime, self.prefix), ignore_errors=True)


def ready_watchdog_stopping(check, server, tmp):
    s = Session(server, tmp, env={"WATCHDOG_USEC": str(WATCHDOG_USEC)})
    try:
        ready = s.wait_for("READY", 60)
        if not check("READY=1 arrives", ready is not None, s.out[-2000:]):
            return
        check("READY=1 is the first message", s.messages[0] is ready, repr(s.messages[:3]))
        check("READY=1 only after the server said `phub: ready`", "phub: ready" in ready["_out"], ready["_out"][-1500:])
        check("READY carries a STATUS", ready.get("STATUS", "").startswith("aggregating: 1 job(s) on 1 lcore(s)"),
              repr(ready))
        check("READY=1 comes from the main process", ready["_pid"] == s.proc.pid, f"{ready['_pid']} != {s.proc.pid}")

        watch_s = 3.0
        s.pump(lambda: time.monotonic() - ready["_t"] >= watch_s, watch_s + 5)
        pings = [m["_t"] for m in s.messages if m.get("WATCHDOG") == "1"]
        interval = WATCHDOG_USEC / 1e6
        gaps = [b - a for a, b in zip([ready["_t"]] + pings, pings)]
        detail = f"interval {interval} s, gaps after READY: {[round(g, 3) for g in gaps]}"
        check("WATCHDOG=1 repeatedly", len(pings) >= watch_s / interval * 2 - 2, detail)
        if gaps:
            check("WATCHDOG=1 at about half the interval (median gap 0.45-0.6 of it)",
                  0.45 * interval <= statistics.median(gaps) <= 0.6 * interval, detail)
            check("no gap between pings reaches the interval", max(gaps) < interval, detail)
            check("pings are paced, not sent every loop (no gap under 0.4 of the interval)",
                  min(gaps) >= 0.4 * interval, detail)
        check("WATCHDOG=1 comes from the main process",
              all(m["_pid"] == s.proc.pid for m in s.messages if m.get("WATCHDOG") == "1"))

        # stdout is a pipe here, as it is a socket to the journal under systemd: not a terminal, fully buffered.
        s.proc.send_signal(signal.SIGUSR1)
        check("SIGUSR1's counters reach stdout at once, not at exit",
              s.pump(lambda: "rx_packets" in s.out, 5), s.out[-1500:])

        rc = s.stop()
        stopping = s.first("STOPPING")
        check("STOPPING=1 on SIGTERM", stopping is not None, repr(s.messages[-3:]))
        check("clean exit after SIGTERM", rc == 0, f"rc={rc}\n{s.out[-1500:]}")
        if stopping:
            check("STOPPING carries a STATUS", stopping.get("STATUS") == "stopping on Terminated", repr(stopping))
            after = s.messages[s.messages.index(stopping) + 1:]
            check("no WATCHDOG=1 after STOPPING=1", not any(m.get("WATCHDOG") for m in after), repr(after))
    finally:
        s.close()


def watchdog_of_another_process(check, server, tmp):
    # WATCHDOG_PID names the process the watchdog is for; systemd sets it, and it is not this server.
    s = Session(server, tmp, env={"WATCHDOG_USEC": "200000", "WATCHDOG_PID": str(os.getpid())})
    try:
        ready = s.wait_for("READY", 60)
        check("READY=1 with another process's watchdog", ready is not None, s.out[-2000:])
        if ready:
            s.pump(lambda: time.monotonic() - ready["_t"] >= 1.0, 5)
            check("no WATCHDOG=1 when WATCHDOG_PID is not the server",
                  not any(m.get("WATCHDOG") for m in s.messages), repr(s.messages))
        check("clean exit", s.stop() == 0, s.out[-1500:])
    finally:
        s.close()


def nothing_before_start(check, server, tmp):
    s = Session(server, tmp, device="net_phubnosuchpmd0")
    try:
        s.pump(lambda: s.eof and s.proc.poll() is not None, 60)
        rc = s.proc.poll()
        check("a start that fails exits non-zero", rc not in (0, None), f"rc={rc}\n{s.out[-1500:]}")
        check("... and sends no message", not s.messages, repr(s.messages))
    finally:
        s.close()
    s = Session(server, tmp, args=("--check",))
    try:
        s.pump(lambda: s.eof and s.proc.poll() is not None, 30)
        check("--check exits 0", s.proc.poll() == 0, s.out[-1500:])
        check("--check sends no message", not s.messages, repr(s.messages))
    finally:
        s.close()


def reload_case(check, server, tmp):
    s = Session(server, tmp)
    try:
        ready = s.wait_for("READY", 60)
        if not check("READY=1 arrives", ready is not None, s.out[-2000:]):
            return
        for what, workers in (("the same config", 1), ("a config that fails validation", 0)):
            s.write_config("net_ring0", workers)
            mark = s.messages[-1]
            out_start = len(s.out)  # the previous outcome is read (below): it comes after its READY=1
            s.proc.send_signal(signal.SIGHUP)
            reloading = s.wait_for("RELOADING", 30, after=mark)
            check(f"SIGHUP with {what}: RELOADING=1", reloading is not None, s.out[-1500:])
            if reloading:
                check(f"SIGHUP with {what}: RELOADING=1 carries MONOTONIC_USEC", "MONOTONIC_USEC" in reloading,
                      repr(reloading))
                again = s.wait_for("READY", 30, after=reloading)
                check(f"SIGHUP with {what}: READY=1 after RELOADING=1", again is not None, s.out[-1500:])
            check(f"SIGHUP with {what}: still running", s.proc.poll() is None, s.out[-1500:])
            # The outcome in the log: every line of it a "phub: " line, a refusal's reason included.
            want = ["applied: added 0, changed 0, removed 0, unchanged 1", "jobs[1].workers: 0 is not in 1..1024"][workers == 0]
            s.pump(lambda: want in s.out[out_start:] and s.out.endswith("\n"), 10)
            logged = s.out[out_start:].splitlines()
            outcome = [line for line in logged if line.startswith("phub: reload of ")]
            check(f"SIGHUP with {what}: the outcome is logged, each line prefixed, no blank line",
                  len(outcome) == 1 and "" not in logged and all(line.startswith("phub: ") for line in logged) and
                  any(want in line for line in logged), "\n".join(logged))
        rc = s.stop()
        check("STOPPING=1 and a clean exit after the reloads", s.first("STOPPING") is not None and rc == 0,
              f"rc={rc}\n{s.out[-1500:]}")
    finally:
        s.close()


def main():
    unwind_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--reload", action="store_true", help="run only the RELOADING case (needs live reload)")
    args = ap.parse_args()
    check = Checks()
    with tempfile.TemporaryDirectory(prefix="phub-notify-") as tmp:
        if args.reload:
            reload_case(check, args.server, tmp)
        else:
            ready_watchdog_stopping(check, args.server, tmp)
            watchdog_of_another_process(check, args.server, tmp)
            nothing_before_start(check, args.server, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

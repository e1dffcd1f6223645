#!/usr/bin/python3
"""Network-namespace test bed for phub clients: a real phub-server on af_packet, workers in namespaces.

Topology (198.18.0.0/24 only; nothing is reachable from the root namespace):
  <p>-srv   phub-server (DPDK af_packet on its "eth0"); the server's address 198.18.0.1 lives in DPDK
  <p>-br    bridge "br0" joining "sv" (to the server) and "w<i>" (to worker i)
  <p>-w<i>  worker i: "eth0" 198.18.0.<10+i>/24
Links can be shaped with tbf (worker links both ways, the bridge -> server direction). Worker-side UDP
segmentation offload is switched off: an af_packet server cannot take UDP GSO super-packets from a veth.
Everything is removed by down(), also on failure, SIGINT or SIGTERM (use it as a context manager): processes,
namespaces, the temporary directory, and the EAL runtime directory /var/run/dpdk/<file prefix> of every
file prefix a config made here named (a server that exits removes its own; one killed with SIGKILL cannot).
Used by tests/system/client, tests/system/training and tools/bench/ddp.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "bench", "lib"))
from phubbench.procs import remove_runtime_dir  # noqa: E402  (the checked removal of a killed EAL's directory)

SERVER_IP = "198.18.0.1"
FAMILY = "pcl"  # every namespace made here starts with this


def sh(*argv, check=True, capture=False, timeout=30):
    r = subprocess.run(argv, timeout=timeout, text=True, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s" % (r.returncode, " ".join(argv), r.stderr.strip()))
    return r.stdout if capture else r.returncode


def nft_apply(ns, rules):
    """Loads the nftables script `rules` (nft -f) in namespace ns; RuntimeError with nft's message if refused."""
    r = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, capture_output=True,
                       timeout=10)
    if r.returncode != 0:
        raise RuntimeError("nft (this kernel may lack what the rule needs): %s" % r.stderr.strip())


def _interrupt(*_):
    raise KeyboardInterrupt()


def worker_ip(i):
    return "198.18.0.%d" % (10 + i)


def lua_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"')
    if isinstance(v, dict):
        return "{ " + ", ".join("%s = %s" % (k, lua_value(x)) for k, x in v.items()) + " }"
    return "{ " + ", ".join(lua_value(x) for x in v) + " }"


MIN_SECRET_BYTES = 16  # the server refuses shorter secrets, and none, unless the job says insecure = true


def marked_insecure(job):
    """The job with `insecure = true` when its secret is missing or short and it does not say otherwise:
    most tests exercise other things than authentication and say so explicitly, as an operator must."""
    secret = job.get("secret", "")
    if "insecure" in job or not isinstance(secret, str) or len(secret) >= MIN_SECRET_BYTES:
        return job  # a secret of the wrong type stays as it is: the tests of bad configs send those
    return dict(job, insecure=True)


def job(id, name, workers, keys, port_base, mode="allreduce", reduce="sum", dtype="fp32", secret="", **extra):
    """A job table; keys is a list of element counts or of (name, elems)."""
    j = dict(id=id, name=name, mode=mode, reduce=reduce, dtype=dtype, workers=workers, port_base=port_base,
             allowed_sources=["198.18.0.0/24"])
    if secret:
        j["secret"] = secret
    j.update(extra)
    j["keys"] = [dict(name=k[0], elems=k[1]) if isinstance(k, tuple) else dict(name="k%d" % i, elems=k)
                 for i, k in enumerate(keys)]
    return j


class Net:
    def __init__(self, workers, prefix=None, worker_mbit=None, server_mbit=None, queue_bytes=2 << 20,
                 build_dir=None, lcores=2, memory_mb=512, mtu=1500, server_cpus="0,1", worker_cpus=None, lcore_map=None):
        self.workers = workers
        self.prefix = prefix or "%s%04x" % (FAMILY, os.getpid() & 0xFFFF)
        self.worker_mbit, self.server_mbit, self.queue_bytes = worker_mbit, server_mbit, queue_bytes
        self.build = build_dir or os.environ.get("PHUB_BUILD_DIR") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "build")
        self.lcores, self.memory_mb, self.mtu = lcores, memory_mb, mtu
        # CPU sets: the server's lcores float over server_cpus; worker processes are confined to worker_cpus
        # (None: anywhere). Pinning them apart models a PS appliance on its own machine. lcore_map, if given,
        # is the EAL's --lcores value instead (e.g. "0@0,1@1": each lcore on a CPU of its own).
        self.server_cpus, self.worker_cpus, self.lcore_map = server_cpus, worker_cpus, lcore_map
        self.namespaces, self.procs = [], []
        self.eal_prefixes = set()  # every --file-prefix a config made here names (down() removes their directories)
        self.server = None
        self.tmp = tempfile.mkdtemp(prefix=self.prefix + "-")
        self.server_log = os.path.join(self.tmp, "server.log")

    # -- names and programs --------------------------------------------------------------------
    def ns_server(self):
        return self.prefix + "-srv"

    def ns_worker(self, i):
        return "%s-w%d" % (self.prefix, i)

    def exe(self, rel):
        return os.path.abspath(os.path.join(self.build, rel))

    # -- life cycle ------------------------------------------------------------------------------
    def __enter__(self):
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()

    def _netns(self, name):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")

    def _shape(self, ns, dev, mbit):
        burst = max(32 * 1024, int(mbit * 1e6 / 8 / 1000))  # at least 1 ms of data
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "%dmbit" % mbit,
           "burst", str(burst), "limit", str(self.queue_bytes + burst))

    def up(self):
        br = self.prefix + "-br"
        self._netns(br)
        sh("ip", "-n", br, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", br, "link", "set", "br0", "up")
        self.add_server_namespace(self.ns_server(), "sv")
        if self.server_mbit:
            self._shape(br, "sv", self.server_mbit)
        for i in range(self.workers):
            w = self.ns_worker(i)
            self._netns(w)
            sh("ip", "-n", w, "link", "add", "eth0", "mtu", str(self.mtu), "type", "veth", "peer", "name", "w%d" % i,
               "mtu", str(self.mtu), "netns", br)
            sh("ip", "-n", w, "addr", "add", worker_ip(i) + "/24", "dev", "eth0")
            sh("ip", "-n", w, "link", "set", "eth0", "up")
            sh("ip", "-n", br, "link", "set", "w%d" % i, "master", "br0", "up")
            # No UDP GSO (an af_packet server cannot take the super-packets) and no TX checksum offload: a
            # veth hands af_packet an unfinished UDP checksum, which the server's software check refuses.
            sh("ip", "netns", "exec", w, "ethtool", "-K", "eth0", "tx-udp-segmentation", "off", check=False)
            sh("ip", "netns", "exec", w, "ethtool", "-K", "eth0", "tx", "off", check=False)
            if self.worker_mbit:
                self._shape(w, "eth0", self.worker_mbit)
                self._shape(br, "w%d" % i, self.worker_mbit)

    def add_server_namespace(self, ns, peer):
        """A namespace for a phub-server: its "eth0" (no address: the server's lives in DPDK) is a veth whose
        other end, `peer`, is on the bridge."""
        br = self.prefix + "-br"
        self._netns(ns)
        sh("ip", "-n", ns, "link", "add", "eth0", "mtu", str(self.mtu), "type", "veth", "peer", "name", peer, "mtu",
           str(self.mtu), "netns", br)
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", br, "link", "set", peer, "master", "br0", "up")

    def down(self):
        """Kills every process started here or still inside a namespace, deletes the namespaces, the EAL runtime
        directory and the temporary directory (config, logs, control socket)."""
        live = [p for p in self.procs if p.poll() is None]
        for p in live:
            p.kill()
        deadline = time.time() + 5
        while any(p.poll() is None for p in live) and time.time() < deadline:
            time.sleep(0.05)
        self.procs = []
        while self.namespaces:
            ns = self.namespaces.pop()
            pids = (sh("ip", "netns", "pids", ns, check=False, capture=True) or "").split()
            if pids:
                subprocess.run(["kill", "-KILL"] + pids, stderr=subprocess.DEVNULL, check=False)
            sh("ip", "netns", "del", ns, check=False)
        # What a server killed here leaves: its EAL runtime directory (one that exits removes its own), and
        # what every server leaves: the config and logs.
        for prefix in sorted(self.eal_prefixes):
            remove_runtime_dir(prefix)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- server ------------------------------------------------------------------------------------
    def config_text(self, jobs, round_stall_ms=2000, polling=(200, 50), settings=None, server_ip=SERVER_IP,
                    file_prefix=None, socket_path=None):
        """The server's config; settings = {table: {key: value}} overrides keys of timeouts, limits, control.
        server_ip, file_prefix (EAL) and socket_path (control) default to those of the one server made here."""
        lcore_map = self.lcore_map or "(0-%d)@(%s)" % (self.lcores, self.server_cpus)
        eal_prefix = file_prefix or self.prefix
        self.eal_prefixes.add(eal_prefix)
        eal = ("--no-huge --no-pci -m %d --file-prefix %s --lcores %s --log-level lib.eal:warning"
               % (self.memory_mb, eal_prefix, lcore_map))
        cfg = dict(
            eal_args=eal,
            ports=[dict(name="p0", device=self.af_packet_device(), ipv4=server_ip + "/24", mtu=self.mtu, rx_desc=1024,
                        tx_desc=1024, steering="ring")],
            lcores=[dict(id=i + 1, ports=["p0"]) for i in range(self.lcores)],
            polling=dict(idle_polls_before_sleep=polling[0], idle_sleep_us=polling[1]),
            jobs=jobs,
            timeouts=dict(round_stall_ms=round_stall_ms, drain_ms=500),
            # ring_entries: the server's default. Every frame crosses a ring here (steering "ring"), and with 1024
            # entries a job of 2 workers among 8 such jobs had 127 slots: an lcore descheduled for a moment
            # on this shared box let an honest job's pushes overrun that share (docs/config.md, "Tenant shares").
            limits=dict(memory_bytes="%dMiB" % (self.memory_mb * 3 // 4), max_jobs=64, mbufs=8191, ring_entries=4096),
            control=dict(socket_path=socket_path or os.path.join(self.tmp, "ctl.sock"), stats_interval_ms=0,
                         metrics_address="127.0.0.1:0"),
        )
        for table, values in (settings or {}).items():
            cfg[table].update(values)
        cfg["jobs"] = [marked_insecure(j) for j in jobs]
        return "-- generated by tests/system/client/phubnet.py\nreturn " + lua_value(cfg) + "\n"

    def af_packet_device(self):
        """af_packet devargs: one queue pair per lcore; frames (and blocks) big enough for the MTU."""
        dev = "net_af_packet0,iface=eth0,qpairs=%d" % self.lcores
        if self.mtu > 1500:
            frame = (self.mtu + 14 + 128 + 1023) // 1024 * 1024  # frame + TPACKET header, 1 KiB multiple
            dev += ",framesz=%d,blocksz=%d,framecnt=1024" % (frame, frame * 4)
        return dev

    def start_server(self, jobs, timeout_s=600, **kw):
        path = os.path.join(self.tmp, "phub.lua")
        with open(path, "w") as f:
            f.write(self.config_text(jobs, **kw))
        self.config_path = path
        self.server = self.launch_server(self.ns_server(), path, self.server_log, timeout_s)
        return self

    def launch_server(self, ns, config_path, log_path, timeout_s=600):
        """phub-server (under `timeout`) in namespace ns; waits until it logs that it is ready. The process."""
        log = open(log_path, "w")
        p = subprocess.Popen(["ip", "netns", "exec", ns, "timeout", str(timeout_s),
                              self.exe("app/phub-server/phub-server"), "--config", config_path],
                             stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(log_path) as f:
                if "phub: ready" in f.read():
                    return p
            if p.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("phub-server did not become ready:\n" + open(log_path).read()[-3000:])

    def signal_server(self, sig, ns=None):
        """Sends sig to the phub-server process itself (in namespace ns, default the server's), found by its
        command name: not to the `timeout` that runs it, whose command line names it too and which forwards
        SIGHUP, SIGINT and SIGTERM to it (the server would get the signal twice)."""
        for pid in (sh("ip", "netns", "pids", ns or self.ns_server(), check=False, capture=True) or "").split():
            try:
                if open("/proc/%s/comm" % pid).read().strip() == "phub-server":
                    os.kill(int(pid), sig)
            except (OSError, ValueError):
                pass

    def stop_server(self):
        """SIGINT, wait; returns the server's counters {'job NAME': {counter: n}, 'drops': {...}} and its log."""
        if self.server is None:
            return {}, ""
        self.signal_server(signal.SIGINT)
        try:
            self.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.server = None
        text = open(self.server_log).read()
        return parse_counters(text), text

    # -- workers ---------------------------------------------------------------------------------------
    def popen(self, i, argv, env=None, **kw):
        full_env = dict(os.environ)
        full_env.update(env or {})
        pin = ["taskset", "-c", self.worker_cpus] if self.worker_cpus else []
        p = subprocess.Popen(["ip", "netns", "exec", self.ns_worker(i)] + pin + list(argv), env=full_env, text=True,
                             **kw)
        self.procs.append(p)
        return p

    def demo_workers(self, job_name, ranks, args, timeout_s=120, per_rank_args=None):
        """Runs phub-demo-worker for each (worker namespace, rank) and returns [(returncode, summary dict, stderr)]."""
        procs = []
        for i, rank in enumerate(ranks):
            extra = per_rank_args(rank) if per_rank_args else []
            argv = ["timeout", str(timeout_s), self.exe("tools/phub-demo/phub-demo-worker"), "--config", self.config_path,
                    "--job", job_name, "--rank", str(rank), "--server", SERVER_IP] + list(args) + list(extra)
            procs.append(self.popen(i % self.workers, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        out = []
        for p in procs:
            so, se = p.communicate(timeout=timeout_s + 30)
            out.append((p.returncode, parse_summary(so), se.strip()))
        return out


def parse_summary(text):
    """The key=value fields of a phub-demo-worker summary line."""
    for line in text.splitlines():
        if line.startswith("phub-demo-worker "):
            return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return {}


def parse_counters(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(job \S+|drops|lcore \d+|port \S+):\s*(.*)$", line)
        if not m:
            continue
        words = m.group(2).split()
        out[m.group(1)] = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)
                           if re.fullmatch(r"\d+", words[i + 1])}
    return out

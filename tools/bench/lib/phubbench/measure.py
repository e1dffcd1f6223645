"""The measurements the benchmarks combine: phub-server driven by phub-pktgen (closed loop, every result
verified), dpdk-testpmd io-forwarding the same pushes, and TX ceilings into a testpmd rxonly sink. Each
runs its processes in a private directory with deadlines and cleans up. CPU 1 holds what is measured
(server or testpmd), CPU 0 the generator."""
import os
import tempfile
import time

from . import pktgen, procs, server, testpmd


# The generator's memif side shares its own mbufs with the measured side instead of copying frames in and
# out of the link's buffers (1500-byte links; jumbo links keep copying), so that one generator CPU can
# outrun the measured CPU: testpmd or phub-server see the same link either way. With copying, the
# generator rather than testpmd bounded the io-forward limit (measured: 15-20 Gbit/s copying, 26-36
# zero-copy) and the server's ratio came out too kind.
GENERATOR_ZERO_COPY = True


def _tag(name):
    return "%s-%d-%d" % (name, os.getpid(), int(time.time() * 1000) % 100000)


# The protection modes, as fields of the job table (server.pktgen_job: a job with a secret
# runs without sessions unless it says so). The headline runs the default, sessions: what every job with a
# secret gets unless its config says otherwise. The secret is a benchmark's, 16 bytes or more.
_SECRET = "bench-server-secret-0123456789"
PROTECTION = {
    "sessions": {"secret": _SECRET, "sessions": True},
    "none": {},
    "job_key": {"secret": _SECRET, "sessions": False, "insecure": True},
    "sessions_mac": {"secret": _SECRET, "sessions": True, "payload_mac": True},
}
DEFAULT_PROTECTION = "sessions"
SESSION_MODES = ("sessions", "sessions_mac")


def job_table(workers, dtype, elems, chunk_bytes, **kw):
    """The benchmarks' job: no secret, so neither side signs or checks tags (the tests cover that); the
    throughput figures are about moving and summing gradients."""
    return [server.job(1, "bench", workers, elems, dtype=dtype, chunk_bytes=chunk_bytes, **kw)]


def _server_cfg(d, tag, jobs, lcores, mtu, bsize, backoff=False):
    sock = os.path.join(d, "memif.sock")
    cfg = os.path.join(d, "server.lua")
    # One lcore: CPU 1 (the generator has CPU 0). Two: one on each CPU, sharing CPU 0 with the generator.
    server.config(cfg, prefix="phubs-" + tag, device=server.memif_device(sock, bsize=bsize), jobs=jobs,
                  lcores=lcores, cpu=[1, 0][:lcores] if lcores <= 2 else 1, mtu=mtu, backoff=backoff,
                  mbufs=16383 if mtu <= 1500 else 8191, memory="512MiB")
    return cfg, sock


def server_goodput(exes, **kw):
    """Closed-loop goodput of phub-server; returns the generator's summary step plus server counters. A memif
    link that passed no ARP (pktgen.ARP_UNANSWERED) starts both sides once more."""
    try:
        return _server_goodput_once(exes, **kw)
    except LinkPassedNoArp:
        print("RETRY the memif link passed no ARP (DPDK 22.11, see tools/phub-pktgen/arp.cpp); starting both again",
              flush=True)
        return _server_goodput_once(exes, **kw)


class LinkPassedNoArp(RuntimeError):
    pass


def _server_goodput_once(exes, *, workers=8, dtype="fp32", elems=2_000_000, chunk_bytes=32768, lcores=1, mtu=1500,
                         duration=3.0, window=64, bsize=None, job=None, gen_args=()):
    """job: extra fields of the job table (e.g. a ps job's mode and optimizer); gen_args: more pktgen options."""
    tag = _tag("srv")
    busy = procs.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="phub-bench-") as d, procs.Cleanup() as c:
        cfg, sock = _server_cfg(d, tag, job_table(workers, dtype, elems, chunk_bytes, **(job or {})), lcores, mtu, bsize)
        srv = server.start(exes["server"], cfg, "phubs-" + tag, c)
        gen_lcores = min(lcores, 2)
        stopped = {}

        def stop_server():
            stopped["r"] = server.stop(srv)

        status, s, err = pktgen.run(exes["pktgen"], prefix="phubg-" + tag, port=server.memif_device(sock, "client", bsize),
                                    args=["--server-config", cfg, "--duration", str(duration), "--window", str(window),
                                          "--progress-ms", "0"] + list(gen_args),
                                    lcores=gen_lcores, cpu=0, timeout=duration + 90, cleanup=c, before_exit=stop_server,
                                    zero_copy=GENERATOR_ZERO_COPY and bsize is None)
        sstatus, counters = stopped["r"]
    if status == pktgen.ARP_UNANSWERED and sstatus == 0:
        raise LinkPassedNoArp(err[-500:])
    if s is None or not s.get("steps"):
        raise RuntimeError("phub-pktgen failed (%s): %s" % (status, err[-2000:]))
    step = dict(s["steps"][0])
    step["ok"] = s["ok"] and status == 0 and sstatus == 0
    step["server_counters"] = counters["jobs"].get("bench", {})
    step["server_drops"] = counters["drops"]
    step["server_lcores"] = lcores
    # The server's own TSC count of the loop iterations that found work, per packet received, over its lcores.
    busy_tsc = sum(l.get("busy_tsc", 0) for l in counters["lcores"])
    rx = sum(l.get("rx_packets", 0) for l in counters["lcores"])
    step["server_busy_cycles_per_packet"] = busy_tsc / rx if rx else None
    step["server_stage_cycles"] = stage_cycles(counters["lcores"])
    step["tsc_hz"] = max((l.get("tsc_hz", 0) for l in counters["lcores"]), default=0)
    # Over each lcore's whole life (start-up before the generator connects and the drain after it included), so
    # not a measure of headroom during the run; cycles per packet above are.
    step["server_busy_percent"] = [l.get("busy_percent") for l in counters["lcores"]]
    step["busy_before"] = busy
    return step


STAGES = ("parse", "gate", "sum", "seal")


def stage_cycles(lcores):
    """The server's own TSC cycles per push by stage, over its lcores (lcore counters stage_*: one push in
    about 64 timed), and its transmit bursts' cycles per frame sent; None where nothing was timed."""
    samples = sum(l.get("stage_samples", 0) for l in lcores)
    tx = sum(l.get("tx_packets", 0) for l in lcores)
    out = {s: (sum(l.get("stage_%s_tsc" % s, 0) for l in lcores) / samples if samples else None) for s in STAGES}
    out["tx"] = sum(l.get("tx_burst_tsc", 0) for l in lcores) / tx if tx else None
    out["samples"] = samples
    return out


def testpmd_io_limit(exes, *, workers=8, dtype="fp32", elems=2_000_000, chunk_bytes=32768, mtu=1500, duration=3.0,
                     bsize=None):
    """dpdk-testpmd io-forwarding (CPU 1) the same pushes phub-pktgen offers as fast as it can (CPU 0):
    returns the forwarded push rate and its payload goodput, as the generator counted the echoes."""
    tag = _tag("io")
    busy = procs.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="phub-bench-") as d, procs.Cleanup() as c:
        cfg, sock = _server_cfg(d, tag, job_table(workers, dtype, elems, chunk_bytes), 1, mtu, bsize)
        pmd = testpmd.start("io", c, prefix="phubt-" + tag, device=server.memif_device(sock, bsize=bsize), cpu=1,
                            jumbo=mtu > 1500)
        status, s, err = pktgen.run(exes["pktgen"], prefix="phubg-" + tag, port=server.memif_device(sock, "client", bsize),
                                    args=["--server-config", cfg, "--server-mac", "02:00:00:00:00:01", "--mode", "open",
                                          "--rate", "0", "--duration", str(duration), "--settle-s", "0",
                                          "--progress-ms", "0"],
                                    lcores=1, cpu=0, timeout=duration + 90, cleanup=c,
                                    zero_copy=GENERATOR_ZERO_COPY and bsize is None)
        pmd.stop(15)
        text = pmd.stdout()
    if s is None:
        raise RuntimeError("phub-pktgen failed against testpmd io (%s): %s" % (status, err[-2000:]))
    step = s["steps"][0]
    return {"echo_pps": step["rx_echo_pps"], "echo_gbps": step["rx_echo_gbps"], "offered_pps": step["tx_pps"],
            "testpmd_rx_pps": testpmd.steady(testpmd.rates(text, "Rx-pps")),
            "testpmd_tx_pps": testpmd.steady(testpmd.rates(text, "Tx-pps")), "busy_before": busy}


def tx_into_sink(exes, source, *, frame_bytes=1504, duration=3.0, workers=8, prebuilt=False):
    """Packets per second a testpmd rxonly sink (CPU 1) receives from `source` on CPU 0: 'pktgen'
    (phub-pktgen pushing as fast as it can, as it sends by default on a copying link: whole-segment pushes
    from its recycled frames, the differing header fields rewritten, the rest built) or 'testpmd' (testpmd
    txonly of frames of the same size). prebuilt=True sends the pktgen job's pushes from pre-built frames
    instead (--frame-cache-mb; its round_modulus is 4)."""
    tag = _tag("tx")
    busy = procs.wait_quiet(timeout=45)  # the sink's rate is the figure: worth waiting for a quiet machine
    with tempfile.TemporaryDirectory(prefix="phub-bench-") as d, procs.Cleanup() as c:
        sock = os.path.join(d, "memif.sock")
        sink = testpmd.start("rxonly", c, prefix="phubk-" + tag, device=server.memif_device(sock), cpu=1, ctl_cpu=1)
        detail = {}
        if source == "pktgen":
            cfg, _ = _server_cfg(d, tag, job_table(workers, "fp32", 131072, 32768, round_modulus=4), 1, 1500, None)
            status, s, err = pktgen.run(exes["pktgen"], prefix="phubg-" + tag, port=server.memif_device(sock, "client"),
                                        args=["--server-config", cfg, "--server-mac", "02:00:00:00:00:01", "--mode",
                                              "open", "--rate", "0", "--duration", str(duration), "--settle-s", "0",
                                              "--progress-ms", "0", "--frame-cache-mb", "128" if prebuilt else "0"],
                                        lcores=1, cpu=0, timeout=duration + 90, cleanup=c)
            if s is None:
                raise RuntimeError("phub-pktgen failed (%s): %s" % (status, err[-2000:]))
            detail = {"generator_tx_pps": s["steps"][0]["tx_pps"], "generator_tx_gbps": s["steps"][0]["tx_gbps"]}
        else:
            src = testpmd.start("txonly", c, prefix="phubx-" + tag, device=server.memif_device(sock, "client"), cpu=0,
                                frame_bytes=frame_bytes)
            time.sleep(duration + 2)
            src.stop(15)
            detail = {"testpmd_tx_pps": testpmd.steady(testpmd.rates(src.stdout(), "Tx-pps"))}
        sink.stop(15)
        detail["sink_rx_pps"] = testpmd.steady(testpmd.rates(sink.stdout(), "Rx-pps"))
        detail["busy_before"] = busy
    return detail

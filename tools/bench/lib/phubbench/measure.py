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
    return _twice_if_no_arp(_server_goodput_once, exes, **kw)


def _twice_if_no_arp(once, exes, **kw):
    """once(exes, **kw), and once more if a memif link passed no ARP (LinkPassedNoArp)."""
    try:
        return once(exes, **kw)
    except LinkPassedNoArp:
        print("RETRY a memif link passed no ARP (DPDK 22.11, see tools/phub-pktgen/arp.cpp); starting all again",
              flush=True)
        return once(exes, **kw)


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


# A server with one port per lcore (tools/bench/server --ports N): port i (p<i>) is a memif link of its own in
# subnet 198.18.<i>.0/24 with the server at .1, polled only by lcore i + 1; each generator drives one port.
def port_ipv4(i):
    return "198.18.%d.1" % i


def ports_server_cfg(d, tag, jobs, nports, mtu=1500, backoff=False):
    """The config (d/server.lua, EAL prefix phubs-<tag>) of a server with `nports` memif ports (d/memif<i>.sock)
    and one lcore per port, every lcore on CPU 1; returns (config path, the ports' sockets)."""
    socks = [os.path.join(d, "memif%d.sock" % i) for i in range(nports)]
    cfg = os.path.join(d, "server.lua")
    server.config(cfg, prefix="phubs-" + tag, ports=[(server.memif_device(s, index=i), port_ipv4(i) + "/24")
                                                     for i, s in enumerate(socks)],
                  jobs=jobs, lcores=[["p%d" % i] for i in range(nports)], cpu=[1] * nports, mtu=mtu, backoff=backoff,
                  mbufs=16383 if mtu <= 1500 else 8191, memory="512MiB")
    return cfg, socks


def port_generator(pktgen_exe, tag, port, sock, cfg, args, zero_copy=GENERATOR_ZERO_COPY):
    """pktgen.run_together's entry for the generator of port `port` (EAL prefix phubg-<tag>-<port>, CPU 0, one
    lcore) on its memif socket: it drives server lcore `port` only (--owners), at the port's address."""
    return dict(exe=pktgen_exe, prefix="phubg-%s-%d" % (tag, port), port=server.memif_device(sock, "client"),
                args=["--server-config", cfg, "--owners", str(port), "--server-ip", port_ipv4(port)] + list(args),
                lcores=1, cpu=0, zero_copy=zero_copy)


def _port_generators(exes, tag, socks, cfg, args):
    return [port_generator(exes["pktgen"], tag, i, sock, cfg, args) for i, sock in enumerate(socks)]


def _overlap(steps):
    """The fraction of the longest generator's window in which every generator ran (their windows on one
    monotonic clock, pktgen's started_s/stopped_s)."""
    common = min(s["stopped_s"] for s in steps) - max(s["started_s"] for s in steps)
    return max(common, 0) / max(s["stopped_s"] - s["started_s"] for s in steps)


def server_goodput_ports(exes, **kw):
    """server_goodput for a server with one port per lcore (see _server_goodput_ports_once)."""
    return _twice_if_no_arp(_server_goodput_ports_once, exes, **kw)


def _server_goodput_ports_once(exes, *, nports=2, workers=8, dtype="fp32", elems=2_000_000, chunk_bytes=32768,
                               mtu=1500, duration=3.0, window=64, job=None):
    """Closed-loop goodput of phub-server with `nports` memif ports and one lcore per port, a job with
    interface_map = true: one phub-pktgen per port (all at once, each driving only the lcore of its port, at
    its port's address), the goodput their sum. Returns the generators' steps, their sum, and the server's
    counters per lcore and per port."""
    tag = _tag("srvp")
    busy = procs.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="phub-bench-") as d, procs.Cleanup() as c:
        jobs = job_table(workers, dtype, elems, chunk_bytes, interface_map=True, **(job or {}))
        cfg, socks = ports_server_cfg(d, tag, jobs, nports, mtu)
        srv = server.start(exes["server"], cfg, "phubs-" + tag, c)
        stopped = {}

        def stop_server():
            stopped["r"] = server.stop(srv)

        runs = pktgen.run_together(
            _port_generators(exes, tag, socks, cfg, ["--duration", str(duration), "--window", str(window),
                                                     "--progress-ms", "0"]),
            timeout=duration + 90, before_exit=stop_server, cleanup=c)
        sstatus, counters = stopped["r"]
        chunk_map = [line for line in srv.stdout().splitlines() if "chunk map:" in line]
    if sstatus == 0 and any(status == pktgen.ARP_UNANSWERED for status, _, _ in runs):
        raise LinkPassedNoArp(" / ".join(err[-300:] for _, _, err in runs))
    for i, (status, s, err) in enumerate(runs):
        if s is None or not s.get("steps"):
            raise RuntimeError("phub-pktgen of port p%d failed (%s): %s" % (i, status, err[-2000:]))
    steps = [dict(s["steps"][0], ok=s["ok"] and status == 0) for status, s, _ in runs]
    lcores = counters["lcores"]
    busy_tsc = sum(l.get("busy_tsc", 0) for l in lcores)
    rx = sum(l.get("rx_packets", 0) for l in lcores)
    return {
        "goodput_gbps": sum(s["goodput_gbps"] for s in steps),
        "pushes_pps": sum(s["pushes_pps"] for s in steps),
        "mismatches": sum(s["mismatches"] for s in steps),
        "ok": all(s["ok"] and s["settled"] for s in steps) and sstatus == 0,
        "window_overlap": _overlap(steps),
        "per_port": [{"port": "p%d" % i, "server_ip": port_ipv4(i), "goodput_gbps": s["goodput_gbps"],
                      "pushes_pps": s["pushes_pps"], "results_ok": s["results_ok"], "mismatches": s["mismatches"],
                      "settled": s["settled"], "generator_idle": s["generator_idle"],
                      "window_s": [s["started_s"], s["stopped_s"]],
                      "rx_bytes": counters["ports"].get("p%d" % i, {}).get("rx_bytes"),
                      "tx_bytes": counters["ports"].get("p%d" % i, {}).get("tx_bytes"),
                      "lcore_rx_packets": lcores[i].get("rx_packets") if i < len(lcores) else None,
                      "redirected_out": lcores[i].get("redirected_out") if i < len(lcores) else None}
                     for i, s in enumerate(steps)],
        "server_counters": counters["jobs"].get("bench", {}),
        "server_drops": counters["drops"],
        "server_status": sstatus,
        "server_lcores": nports,
        "chunk_map": chunk_map,
        "server_busy_cycles_per_packet": busy_tsc / rx if rx else None,
        "tsc_hz": max((l.get("tsc_hz", 0) for l in lcores), default=0),
        "generator_steps": steps,
        "busy_before": busy,
    }


def testpmd_io_limit_ports(exes, *, nports=2, workers=8, dtype="fp32", elems=2_000_000, chunk_bytes=32768, mtu=1500,
                           duration=3.0):
    """dpdk-testpmd io-forwarding `nports` memif ports, each back to itself (--port-topology=loop), with one
    forwarding lcore per port on CPU 1 (its control lcore on CPU 0), against one open-loop phub-pktgen per port
    (all at once on CPU 0, each pushing the chunks of its port's lcore of the same job as fast as it can):
    returns the forwarded push rate and payload goodput summed over the ports, as the generators counted the
    echoes."""
    tag = _tag("iop")
    busy = procs.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="phub-bench-") as d, procs.Cleanup() as c:
        cfg, socks = ports_server_cfg(d, tag, job_table(workers, dtype, elems, chunk_bytes, interface_map=True),
                                      nports, mtu)
        pmd = testpmd.start("io", c, prefix="phubt-" + tag,
                            device=[server.memif_device(s, index=i) for i, s in enumerate(socks)], cpu=[1] * nports,
                            jumbo=mtu > 1500)
        runs = pktgen.run_together(
            # testpmd's ports have one queue pair each, where the server's have a TX queue per lcore
            _port_generators(exes, tag, socks, cfg, ["--queues", "1", "--server-mac", "02:00:00:00:00:01", "--mode",
                                                     "open", "--rate", "0", "--duration", str(duration), "--settle-s",
                                                     "0", "--progress-ms", "0"]),
            timeout=duration + 90, before_exit=lambda: None, cleanup=c)
        pmd.stop(15)
        text = pmd.stdout()
    for i, (status, s, err) in enumerate(runs):
        if s is None or not s.get("steps"):
            raise RuntimeError("phub-pktgen of port p%d failed against testpmd io (%s): %s" % (i, status, err[-2000:]))
    steps = [s["steps"][0] for _, s, _ in runs]
    rx, tx = testpmd.rates(text, "Rx-pps"), testpmd.rates(text, "Tx-pps")
    return {"echo_pps": sum(s["rx_echo_pps"] for s in steps), "echo_gbps": sum(s["rx_echo_gbps"] for s in steps),
            "offered_pps": sum(s["tx_pps"] for s in steps), "window_overlap": _overlap(steps),
            "per_port": [{"port": "p%d" % i, "echo_pps": s["rx_echo_pps"], "echo_gbps": s["rx_echo_gbps"],
                          "offered_pps": s["tx_pps"], "generator_idle": s["generator_idle"],
                          "window_s": [s["started_s"], s["stopped_s"]],
                          # testpmd prints each port's statistics in port order every second
                          "testpmd_rx_pps": testpmd.steady(rx[i::nports]), "testpmd_tx_pps": testpmd.steady(tx[i::nports])}
                         for i, s in enumerate(steps)],
            "busy_before": busy}

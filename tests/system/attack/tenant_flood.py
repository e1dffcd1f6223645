#!/usr/bin/python3
"""A tenant's flood, run inside the attacker's network namespace by flood_test.py: valid pushes into one
2-rank job with no secret (anyone on the segment can send them, and its own tenant can whatever the secret),
at a bounded rate, each answered by the server with the whole segment's result.

Setup: as both ranks, push round 0 of every segment of the job's two chunks (one per lcore, UDP ports
PORT_BASE and PORT_BASE + 1), so each round completes. Then it prints "ready" and, until SIGTERM or
--seconds, sends rank 0's round-0 pushes again at --pps from --sockets source ports (their flows land on
both of the server's queues, so some cross the hand-off ring to the chunk's owner): each is a late copy of a
completed round, which the server answers with the result again. At the end one JSON line: what was sent
and what came back.

--sink sends the same datagrams at the same pace to a socket of its own on 127.0.0.1, which it drains as it
drains the server's replies: the control leg of flood_test.py, so that this sender's own CPU (its sends,
receives and wake-ups on a machine whose two CPUs everything shares) weighs on both legs and the difference
between them is what the server's handling of the flood costs the other tenant.

--toggle-ms T alternates the two in windows of T ms, measured from the start time it prints: windows 0, 2,
4, ... to the server, 1, 3, 5, ... to the sink. flood_test.py lines the steady job's rounds up with them
(CLOCK_MONOTONIC: time.monotonic here, the demo worker's steady clock there), so that both kinds of window
see the same drift of this shared machine's load.

Usage: tenant_flood.py SERVER_IP PORT_BASE JOB_ID [--pps R] [--sockets N] [--seconds S] [--sink | --toggle-ms T]
"""
import argparse
import json
import select
import signal
import socket
import time

from attacker import HEADER, L234_BYTES, PUSH, SEGMENT_ELEMS, SEGMENTS

CHUNKS = 2  # the job's keys: two chunks of SEGMENTS segments each


def push(job, rank, chunk, seg, payload):
    return HEADER.pack(0x5048, 3, PUSH, 0, 0, 0, job, rank, len(payload), 0, chunk, seg * SEGMENT_ELEMS, SEGMENT_ELEMS,
                       0, 0, 0, 0, 0, 0) + payload


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("port_base", type=int)
    ap.add_argument("job", type=int)
    ap.add_argument("--pps", type=float, default=2000)
    ap.add_argument("--sockets", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=50)
    ap.add_argument("--sink", action="store_true", help="send to a socket of this process, not the server")
    ap.add_argument("--toggle-ms", type=float, default=0, help="alternate between the server and the sink")
    a = ap.parse_args()
    if a.sink and a.toggle_ms:
        ap.error("--sink and --toggle-ms exclude each other")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    socks = []
    for _ in range(a.sockets):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("0.0.0.0", 0))
        s.setblocking(False)
        socks.append(s)
    if a.sink or a.toggle_ms:
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sink.bind(("127.0.0.1", 0))
        sink.setblocking(False)
        socks.append(sink)
    got = {"datagrams": 0, "bytes": 0, "sink_datagrams": 0}

    def drain():
        while True:
            ready = select.select(socks, [], [], 0)[0]
            if not ready:
                return
            for s in ready:
                try:
                    while True:
                        n = len(s.recv(65536))
                        if s is socks[-1] and len(socks) > a.sockets:  # the sink: this sender's own datagrams
                            got["sink_datagrams"] += 1
                        else:
                            got["bytes"] += n + L234_BYTES
                            got["datagrams"] += 1
                except BlockingIOError:
                    pass

    payload = bytes(4 * SEGMENT_ELEMS)
    senders = socks[:a.sockets]
    if not a.sink:  # also when toggling: the server's windows answer like the plain flood's
        for chunk in range(CHUNKS):
            for rank in (0, 1):
                for seg in range(SEGMENTS):
                    senders[0].sendto(push(a.job, rank, chunk, seg, payload), (a.server, a.port_base + chunk))
        time.sleep(0.3)
        drain()
    setup = dict(got)
    got.update(datagrams=0, bytes=0, sink_datagrams=0)
    start = time.monotonic()
    print("ready %d" % int(start * 1e9), flush=True)

    def to_server(now):
        return not a.sink and (not a.toggle_ms or int((now - start) * 1000 / a.toggle_ms) % 2 == 0)

    frames = [(push(a.job, 0, chunk, seg, payload), chunk) for chunk in range(CHUNKS) for seg in range(SEGMENTS)]
    sent = sent_bytes = to_sink = 0
    end = start + a.seconds
    while not stop and time.monotonic() < end:
        # Paced: never ahead of R packets per second since the start (a tenant flood, not a CPU one).
        now = time.monotonic()
        due = int((now - start) * a.pps)
        server = to_server(now)
        while sent < due:
            data, chunk = frames[sent % len(frames)]
            try:
                senders[sent % len(senders)].sendto(data, (a.server, a.port_base + chunk) if server else
                                                    sink.getsockname())
            except BlockingIOError:
                break
            sent += 1
            to_sink += 0 if server else 1
            sent_bytes += len(data) + L234_BYTES
        drain()
        time.sleep(0.02)  # bursts of pps / 50: few wake-ups, so the sender itself takes little CPU
    elapsed = time.monotonic() - start
    time.sleep(0.2)
    drain()
    print(json.dumps(dict(sent=sent, sent_to_sink=to_sink, seconds=elapsed, pps=sent / elapsed if elapsed else 0,
                          bytes_in=sent_bytes, replies=got["datagrams"], bytes_out=got["bytes"],
                          sink_received=got["sink_datagrams"], setup_replies=setup["datagrams"])))


if __name__ == "__main__":
    main()

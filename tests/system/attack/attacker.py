#!/usr/bin/python3
"""One attack against a phub-server, run inside the attacker's network namespace by attack_test.py. It
speaks the wire protocol (docs/protocol.md) from a plain UDP socket and never joins, so the server has no
proof that the attacker receives at its address. It prints one JSON line: the frame bytes it sent during
the attack proper ("in", what the server received) and the frame bytes the server sent back to it ("out"),
plus the setup's bytes, kept apart.

Usage: attacker.py ATTACK SERVER_IP PORT JOB_ID [--seconds S]
  rerequest  push one round of a 2-rank job's chunk 0 as both ranks (setup), then whole-chunk rerequests
  pull       init chunk 0 of a 1-rank ps job as rank 0 (setup), then whole-chunk pulls
  stall      push one segment as rank 0 of a 2-rank job whose rank 1 never comes, then listen: the
             server's round_stalled reports
  hijack     whole-chunk rerequests as rank 1 of a job other workers are running, from the attacker's
             address (the rank's proven address is kept; before that rule each moved it here)
  forged     pushes and rerequests into a job with a secret, without it (the tag field 0)
  tagflood   for --seconds, as fast as Python sends: pushes and rerequests of ranks 0 and 1 with random tags
             and sequence numbers (what a flood of forged session packets looks like)
  ping       ICMP echo requests to the server as fast as Python sends them, for --seconds
"""
import json
import os
import select
import socket
import struct
import sys
import time

HEADER = struct.Struct("!HBBHBBIHHIIIHHIIQIH")  # 54 bytes, docs/protocol.md "Header"
assert HEADER.size == 54
PUSH, RESULT, REREQUEST, ERROR, INIT, PULL = 1, 2, 3, 6, 11, 12
EPOCH_MISMATCH = 6
SEGMENT_ELEMS = 352   # fp32 at MTU 1500
SEGMENTS = 8          # chunk 0 of the test's target jobs: 2816 elements
L234_BYTES = 14 + 20 + 8


def message(opcode, job, rank, rnd, seg=None, payload=b"", epoch=0):
    offset, count = (0, 0) if seg is None else (seg * SEGMENT_ELEMS, SEGMENT_ELEMS)
    return HEADER.pack(0x5048, 3, opcode, 0, 0, 0, job, rank, len(payload), rnd, 0, offset, count, epoch, 0, 0, 0,
                       0, 0) + payload


class Wire:
    def __init__(self, server, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("0.0.0.0", 0))
        self.to = (server, port)
        self.sent = self.got = 0
        self.opcodes = {}
        self.epoch = None  # the job's epoch, as an epoch_mismatch error names it

    def send(self, data):
        self.sock.sendto(data, self.to)
        self.sent += len(data) + L234_BYTES

    def listen(self, seconds):
        end = time.time() + seconds
        while True:
            left = end - time.time()
            if left <= 0:
                return
            if select.select([self.sock], [], [], left)[0]:
                data = self.sock.recv(65536)
                self.got += len(data) + L234_BYTES
                op = data[3] if len(data) >= 4 else 0
                self.opcodes[op] = self.opcodes.get(op, 0) + 1
                if op == ERROR and len(data) >= HEADER.size and data[7] == EPOCH_MISMATCH:
                    self.epoch = HEADER.unpack_from(data)[15] & 0xffff

    def mark(self):
        """The bytes so far, and start counting afresh."""
        out = {"in": self.sent, "out": self.got}
        self.sent = self.got = 0
        return out


def icmp_checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def ping_flood(server, seconds):
    """Echo requests (56-byte body) as fast as possible for `seconds`, then 0.5 s of listening; frame bytes
    both ways (Ethernet 14 + the IPv4 packet) and the requests and replies counted."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setblocking(False)
    body = bytes(56)
    sent = got = requests = replies = 0
    end = time.time() + seconds
    seq = 0

    def drain():
        nonlocal got, replies
        while True:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return
            ihl = (data[0] & 0x0f) * 4
            if len(data) > ihl and data[ihl] == 0:  # echo reply
                got += len(data) + 14
                replies += 1

    while time.time() < end:
        seq = (seq + 1) & 0xffff
        head = struct.pack("!BBHHH", 8, 0, 0, 0x5048, seq)
        packet = struct.pack("!BBHHH", 8, 0, icmp_checksum(head + body), 0x5048, seq) + body
        try:
            sock.sendto(packet, (server, 0))
        except BlockingIOError:
            drain()
            continue
        sent += 20 + len(packet) + 14
        requests += 1
        if requests % 64 == 0:
            drain()
    end = time.time() + 0.5
    while time.time() < end:
        drain()
        time.sleep(0.01)
    return {"in": sent, "out": got, "requests": requests, "replies": replies, "seconds": seconds}


def main():
    attack, server, port, job = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 2.0
    w = Wire(server, port)
    zeros = bytes(SEGMENT_ELEMS * 4)
    requests = 200
    if attack == "rerequest":
        for rank in (0, 1):
            for s in range(SEGMENTS):
                w.send(message(PUSH, job, rank, 0, s, zeros))
        w.listen(1.0)
        setup = w.mark()
        for _ in range(requests):
            w.send(message(REREQUEST, job, 1, 0))
    elif attack == "pull":
        for s in range(SEGMENTS):
            w.send(message(INIT, job, 0, 0, s, zeros))
        w.listen(1.0)
        setup = w.mark()
        for _ in range(requests):
            w.send(message(PULL, job, 0, 0))
    elif attack == "stall":
        setup = w.mark()
        w.send(message(PUSH, job, 0, 0, 0, zeros))
    elif attack == "hijack":
        # The job's workers restarted it in a new epoch: an epoch_mismatch error names the current one. The
        # workers may restart it again after the first question (a new run's rank 0 starting): every later
        # epoch_mismatch names the epoch to use next.
        w.send(message(REREQUEST, job, 1, 0))
        w.listen(0.3)
        setup = w.mark()
        end = time.time() + seconds
        while time.time() < end:
            for rnd in range(0, 400, 8):  # the attacker does not know the round: it guesses
                w.send(message(REREQUEST, job, 1, rnd, epoch=w.epoch or 0))
            w.listen(0.02)
    elif attack == "forged":
        setup = w.mark()
        for r in range(requests):
            w.send(message(PUSH, job, 0, 0, 0, zeros) if r % 2 == 0 else message(REREQUEST, job, 0, 0))
    elif attack == "tagflood":
        setup = w.mark()
        end = time.time() + seconds
        n = 0
        while time.time() < end:
            for _ in range(64):
                msg = bytearray(message(PUSH, job, n % 2, 0, 0, zeros) if n % 4 else message(REREQUEST, job, n % 2, 0))
                msg[40:48] = os.urandom(8)   # the tag
                msg[48:52] = os.urandom(4)   # seq
                w.send(bytes(msg))
                n += 1
            w.listen(0)
        seconds = 0.2
    elif attack == "ping":
        print(json.dumps(ping_flood(server, seconds)))
        return
    else:
        raise SystemExit("unknown attack " + attack)
    w.listen(seconds)
    result = w.mark()
    result.update(setup_in=setup["in"], setup_out=setup["out"], opcodes={str(k): v for k, v in w.opcodes.items()})
    print(json.dumps(result))


if __name__ == "__main__":
    main()

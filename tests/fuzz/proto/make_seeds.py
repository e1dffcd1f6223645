#!/usr/bin/python3
"""Write the seed corpus of fuzz-proto: valid phub frames of every opcode and dtype, ARP and ICMP."""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(ethertype):
    return bytes.fromhex("020000000002020000000001") + struct.pack("!H", ethertype)


def ipv4(proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, proto, 0,
                    bytes([198, 18, 0, 2]), bytes([198, 18, 0, 1]))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def phub(opcode, dtype, count, payload):
    # version 3: epoch 1 at offset 30
    h = struct.pack("!HBBHBBIHHIIIHHIIQIH", 0x5048, 3, opcode, 0, dtype, 0, 1, 3, len(payload), 5, 2,
                    352 * 2, count, 1, 0, 0, 0, 7, 0)
    assert len(h) == 54
    return h + payload


def udp(payload, dport=40000):
    return struct.pack("!HHHH", 33333, dport, 8 + len(payload), 0) + payload


n = 0
for opcode in range(1, 16):
    for dtype, size in ((0, 4), (1, 2), (2, 2)):
        carries = opcode in (1, 2, 4, 5, 11, 15)
        count = 4 if carries else 0
        payload = bytes(range(count * size)) if carries else b""
        if opcode in (7, 13):  # join and joined carry the 44-byte session handshake (version 1, a nonce)
            payload = bytes([1, 0, 0, 0]) + bytes(range(1, 17)) + bytes(24)
        frame = eth(0x0800) + ipv4(17, udp(phub(opcode, dtype, count, payload)))
        with open(os.path.join(out, f"op{opcode}_dt{dtype}"), "wb") as f:
            f.write(frame)
        n += 1
# hub_state (opcode 14): its 64-byte payload (fingerprint, nonce 1, echo 0, holder, first round, flags)
state = struct.pack("!5QIIIIII", 1, 2, 3, 4, 5, 1, 0, 77, 0, 0, 0)
open(os.path.join(out, "op14"), "wb").write(eth(0x0800) + ipv4(17, udp(phub(14, 0, 0, state))))
n += 1
arp = eth(0x0806) + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, bytes(6), bytes([198, 18, 0, 2]), bytes(6),
                                bytes([198, 18, 0, 1]))
open(os.path.join(out, "arp"), "wb").write(arp)
icmp = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"ping"
icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
open(os.path.join(out, "icmp"), "wb").write(eth(0x0800) + ipv4(1, icmp))
print(f"wrote {n + 2} seeds to {out}")

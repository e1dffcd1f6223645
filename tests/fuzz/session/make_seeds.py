#!/usr/bin/python3
"""Write the seed corpus of fuzz-session: join and joined payloads, whole join and joined messages (header
and payload), and a run of sequence numbers for the replay window."""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "seeds")
os.makedirs(out, exist_ok=True)

worker_nonce = bytes(range(0x10, 0x20))
server_nonce = bytes(range(0x80, 0x90))
join = struct.pack("!B3x", 1) + worker_nonce + bytes(24)  # padded to the joined's length
joined = struct.pack("!B3x", 1) + worker_nonce + server_nonce + struct.pack("!IHH", 0xC6120065, 50003, 0)
confirm = struct.pack("!B3x", 2) + worker_nonce + server_nonce + bytes(8)  # a confirm of the server's challenge
assert len(join) == 44 and len(joined) == 44 and len(confirm) == 44


def header(opcode, payload):
    # version 3 header: job 3, rank 2, the payload's length, epoch 4, aux (incarnation) 0x5eed, seq 9
    h = struct.pack("!HBBHBBIHHIIIHHIIQIH", 0x5048, 3, opcode, 0, 0, 0, 3, 2, len(payload), 0, 0, 0, 0, 4, 0,
                    0x5EED, 0, 9, 0)
    assert len(h) == 54
    return h


seeds = {
    "join_payload": join,
    "joined_payload": joined,
    "join_message": header(7, join) + join,
    "confirm_payload": confirm,
    "confirm_message": header(7, confirm) + confirm,
    "joined_message": header(13, joined) + joined,
    # low halves around a wrap, each followed by a "tag verified" byte
    "window": b"".join(struct.pack("!IB", s & 0xFFFFFFFF, s % 3 != 0) for s in
                       [1, 2, 5, 3, 3, 0xFFFFFF00, 0xFFFFFFF0, 0x10, 2, 0x7FFFFFFF, 0x10, 0x11]),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")

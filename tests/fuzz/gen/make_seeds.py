#!/usr/bin/python3
"""Write the seeds of fuzz-trace from a trace phub-pktgen wrote (two jobs: 1 allreduce, 2 ps, both bf16, 3
workers, 3000 elements in 4 KiB chunks):

  phub-pktgen --job id=1,workers=3,keys=3000,dtype=bf16,chunk_bytes=4096 \\
      --job id=2,workers=3,keys=3000,dtype=bf16,chunk_bytes=4096,mode=ps,optimizer=adam \\
      --server-ip 198.18.0.1 --write-pcap trace.pcap --pcap-rounds 2
  make_seeds.py trace.pcap [OUT_DIR]

Seeds: the first frames as written (pushes, microsecond format), the same turned into results (opcode 2,
so the verifier sees them), that in the nanosecond format, and byte-swapped."""
import os
import struct
import sys

OPCODE_AT = 14 + 20 + 8 + 3  # Ethernet, IPv4, UDP, then magic u16, version u8, opcode u8


def records(data):
    off = 24
    while off + 16 <= len(data):
        ts, frac, incl, orig = struct.unpack_from("<IIII", data, off)
        yield ts, frac, data[off + 16:off + 16 + incl]
        off += 16 + incl


def pcap(frames, magic=0xA1B2C3D4, endian="<"):
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    for ts, frac, f in frames:
        out += struct.pack(endian + "IIII", ts, frac, len(f), len(f)) + f
    return out


def main():
    src = open(sys.argv[1], "rb").read()
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
    os.makedirs(out, exist_ok=True)
    frames = list(records(src))
    pick = frames[:4] + frames[len(frames) // 2:len(frames) // 2 + 4] + frames[-4:]
    results = [(ts, frac, f[:OPCODE_AT] + b"\x02" + f[OPCODE_AT + 1:]) for ts, frac, f in pick]
    seeds = {"pushes_us.pcap": pcap(pick), "results_us.pcap": pcap(results),
             "results_ns.pcap": pcap(results, magic=0xA1B23C4D), "results_swapped.pcap": pcap(results, endian=">")}
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()

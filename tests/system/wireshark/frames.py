"""phub frames built from docs/protocol.md, independently of lib/proto, and classic pcap files: the dissector
test's own well-formed sample of every opcode and its malformed frames (each with what the dissector must say)."""
import struct

HEADER = struct.Struct(">HBBHBBIHHIIIHHIIQIH")  # the 54-byte header, big-endian
MAGIC, VERSION = 0x5048, 3
OPCODES = {"push": 1, "result": 2, "rerequest": 3, "fwd_partial": 4, "fwd_result": 5, "error": 6, "join": 7,
           "leave": 8, "probe_request": 9, "probe_reply": 10, "init": 11, "pull": 12, "joined": 13, "hub_state": 14,
           "fwd_init": 15, "hparams": 16, "fwd_hparams": 17}
CRC, RETRANSMIT, MEAN, EPOCH_START, FRESH_WEIGHTS, MAC, NONFINITE, TAIL = 1, 2, 4, 8, 16, 32, 64, 128
SERVER_IP, WORKER_IP = "198.18.0.1", "198.18.0.10"
PORT = 42100


def header(opcode, payload=b"", flags=0, dtype=0, status=0, job=1, rank=0, round=0, chunk=0, offset=0, count=None,
           epoch=0, crc=0, aux=0, tag=0, seq=1, reserved=0, payload_bytes=None, magic=MAGIC, version=VERSION):
    op = OPCODES[opcode] if isinstance(opcode, str) else opcode
    if count is None:
        elems = len(payload) - (8 if flags & TAIL else 0)
        count = elems // (4 if dtype == 0 else 2) if op in (1, 2, 4, 5, 11, 15) else 0
    return HEADER.pack(magic, version, op, flags, dtype, status, job, rank,
                       len(payload) if payload_bytes is None else payload_bytes, round, chunk, offset, count, epoch,
                       crc, aux, tag, seq, reserved) + payload


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def _ip(a):
    return bytes(int(x) for x in a.split("."))


def _csum(data):
    s = sum(struct.unpack(">%dH" % (len(data) // 2), data + b"\0" * (len(data) % 2)))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(udp_payload, src=WORKER_IP, dst=SERVER_IP, sport=20000, dport=PORT):
    """Ethernet / IPv4 (DF, checksum filled) / UDP (checksum 0) around a UDP payload."""
    eth = bytes.fromhex("02706800000102706700000108 00".replace(" ", ""))
    udp = struct.pack(">HHHH", sport, dport, 8 + len(udp_payload), 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp) + len(udp_payload), 0, 0x4000, 64, 17, 0, _ip(src), _ip(dst))
    ip = ip[:10] + struct.pack(">H", _csum(ip)) + ip[12:]
    return eth + ip + udp + udp_payload


def elements(n, dtype=0):
    if dtype == 0:
        return b"".join(struct.pack("<f", float(i)) for i in range(n))
    return b"".join(struct.pack("<H", 0x3c00) for _ in range(n))


def join_payload(nonce=b"\x11" * 16, challenge=None):
    """A first join (no challenge) or a confirm (version 2, the server's challenge)."""
    if challenge is None:
        return bytes([1, 0, 0, 0]) + nonce + bytes(24)
    return bytes([2, 0, 0, 0]) + nonce + challenge + bytes(8)


def joined_payload(options=3, wnonce=b"\x11" * 16, snonce=b"\x22" * 16, reply=WORKER_IP, port=20000):
    return bytes([1, options, 0, 0]) + wnonce + snonce + _ip(reply) + struct.pack(">HH", port, 0)


def hub_state_payload(nonce=7, echo=9, holder=0x1234, first_round=0, flags=0, reserved=0, life=0x1788f0a5c3b2e100):
    return struct.pack(">5QIIIIIIQ", 1, 2, 3, 4, 5, nonce, echo, holder, first_round, flags, reserved, life)


def hparams_payload(family=2, lr=3e-4, momentum=0.0, beta1=0.9, beta2=0.95, eps=1e-8, wd=0.1, flags=0, size=56):
    """A hyperparameter set (docs/protocol.md, "Hyperparameters"): version, family, flags, reserved, 6 doubles."""
    return (struct.pack(">BBBBI6d", 1, family, flags, 0, 0, lr, momentum, beta1, beta2, eps, wd) + bytes(64))[:size]


def probe_body(extra=0):
    return struct.pack(">QQQ", 123456789, 0xabcdef, 0) + bytes(extra)


def well_formed():
    """One or more well-formed messages of every opcode: [(description, udp payload, {field: value})], the
    expected values being what `tshark -T fields` must print for those phub fields."""
    pay = elements(352)
    half = elements(64, dtype=2)
    out = [
        ("push fp32 with crc", header("push", pay, flags=CRC, rank=3, round=7, chunk=2, offset=352, crc=crc32c(pay),
                                      aux=0xc0c0, seq=11),
         {"phub.opcode": "1", "phub.rank": "3", "phub.round": "7", "phub.chunk_id": "2", "phub.elem_offset": "352",
          "phub.elem_count": "352", "phub.crc_ok": "1", "phub.cookie": "0x0000c0c0"}),
        ("push bf16, session MAC", header("push", half, flags=MAC, dtype=2, crc=0x01020304, aux=0x05060708),
         {"phub.dtype": "2", "phub.payload_mac": "0x0102030405060708", "phub.flags.mac": "1"}),
        ("result mean", header("result", pay, flags=MEAN, rank=1), {"phub.opcode": "2", "phub.flags.mean": "1"}),
        ("rerequest", header("rerequest", round=4, chunk=1), {"phub.opcode": "3", "phub.round": "4"}),
        ("fwd_partial", header("fwd_partial", elements(16), rank=1, crc=0xaaaa0000, aux=0xbbbb),
         {"phub.opcode": "4", "phub.hub_mac": "0xaaaa00000000bbbb"}),
        ("fwd_result", header("fwd_result", elements(16), rank=0), {"phub.opcode": "5"}),
        ("error round_behind", header("error", status=2, aux=41), {"phub.status": "2", "phub.error_detail": "41"}),
        ("join epoch_start", header("join", join_payload(), flags=EPOCH_START, epoch=2, aux=0xfeed),
         {"phub.opcode": "7", "phub.incarnation": "0x0000feed", "phub.flags.epoch_start": "1",
          "phub.handshake.worker_nonce": ":".join(["11"] * 16)}),
        ("join confirm", header("join", join_payload(challenge=b"\x33" * 16), aux=0xfeed),
         {"phub.opcode": "7", "phub.handshake.version": "2", "phub.handshake.challenge": ":".join(["33"] * 16)}),
        ("leave", header("leave", aux=0xfeed), {"phub.opcode": "8", "phub.incarnation": "0x0000feed"}),
        ("probe_request", header("probe_request", probe_body(), aux=0x99),
         {"phub.opcode": "9", "phub.probe.nonce": "0x0000000000abcdef", "phub.probe_nonce": "0x00000099"}),
        ("probe_reply, longer body", header("probe_reply", probe_body(40)), {"phub.opcode": "10"}),
        ("init", header("init", elements(100)), {"phub.opcode": "11", "phub.elem_count": "100"}),
        ("pull", header("pull", chunk=5), {"phub.opcode": "12", "phub.chunk_id": "5"}),
        ("joined", header("joined", joined_payload(), crc=0x7777, aux=0xfeed),
         {"phub.opcode": "13", "phub.cookie": "0x00007777", "phub.handshake.session": "1",
          "phub.handshake.payload_mac": "1", "phub.handshake.reply_ipv4": WORKER_IP,
          "phub.handshake.reply_port": "20000", "phub.handshake.server_nonce": ":".join(["22"] * 16)}),
        ("joined confirmed", header("joined", joined_payload(options=7), aux=0xfeed),
         {"phub.opcode": "13", "phub.handshake.confirmed": "1"}),
        ("redirect", header("joined", joined_payload(options=8, snonce=bytes(16)), chunk=0xc6120101),
         {"phub.opcode": "13", "phub.handshake.redirect": "1", "phub.handshake.confirmed": "0"}),
        ("push after the joined: a session packet", header("push", elements(8), seq=2), {"phub.session": "1"}),
        ("hub_state", header("hub_state", hub_state_payload(flags=1), rank=1),
         {"phub.opcode": "14", "phub.hub_state.nonce": "0x00000007", "phub.hub_state.echo": "0x00000009",
          "phub.hub_state.rank0_holder": "0x00001234", "phub.hub_state.fresh_weights": "1",
          "phub.hub_state.life": str(0x1788f0a5c3b2e100)}),
        ("fwd_init segment", header("fwd_init", elements(32), rank=1), {"phub.opcode": "15"}),
        ("fwd_init weights request", header("fwd_init", b"", rank=1, count=0), {"phub.opcode": "15"}),
        ("retransmitted push", header("push", elements(4), flags=RETRANSMIT), {"phub.flags.retransmit": "1"}),
        ("ps push naming a hyperparameter set, declared non-finite",
         header("push", elements(16) + struct.pack(">Q", 0x0123456789abcdef), flags=TAIL | NONFINITE),
         {"phub.flags.tail": "1", "phub.flags.nonfinite": "1", "phub.hparams.id": "0x0123456789abcdef",
          "phub.elem_count": "16"}),
        ("hparams", header("hparams", hparams_payload(), chunk=0x01234567, offset=0x89abcdef),
         {"phub.opcode": "16", "phub.hparams.family": "2", "phub.hparams.lr": "0.0003", "phub.hparams.beta2": "0.95"}),
        ("hparams acknowledgement", header("hparams", b"", chunk=0x01234567, offset=0x89abcdef), {"phub.opcode": "16"}),
        ("fwd_hparams", header("fwd_hparams", hparams_payload(family=0, momentum=0.9, beta1=0, beta2=0, eps=0,
                                                              flags=1), rank=1),
         {"phub.opcode": "17", "phub.hparams.nesterov": "1"}),
        ("state pull, second moment", header("pull", status=3, chunk=2), {"phub.state_array": "3"}),
        ("state result with its step count", header("result", elements(8) + struct.pack(">Q", 100), flags=TAIL,
                                                    status=2),
         {"phub.state_array": "2", "phub.state.step": "100"}),
        ("skipped round's result", header("result", elements(8), flags=NONFINITE), {"phub.flags.nonfinite": "1"}),
    ]
    return out


def malformed():
    """[(description, udp payload, expert field the dissector must raise)]."""
    pay = elements(8)
    return [
        ("shorter than the header", header("push")[:30], "phub.malformed.short"),
        ("bad magic", header("push", pay, magic=0x4850), "phub.malformed.magic"),
        ("version 2", header("push", pay, version=2), "phub.malformed.version"),
        ("opcode 0", header(0), "phub.malformed.opcode"),
        ("opcode 99", header(99), "phub.malformed.opcode"),
        ("unknown flag bit", header("push", pay, flags=0x0200), "phub.malformed.flags"),
        ("follows_map on a push", header("push", pay, flags=0x0100), "phub.malformed.flag_combination"),
        ("mac with crc", header("push", pay, flags=CRC | MAC), "phub.malformed.flag_combination"),
        ("dtype 7", header("push", pay, dtype=7, count=8), "phub.malformed.dtype"),
        ("status 12 in an error", header("error", status=12), "phub.malformed.status"),
        ("state array 4 in a pull", header("pull", status=4), "phub.malformed.status"),
        ("tail on a join", header("join", join_payload(), flags=TAIL), "phub.malformed.flag_combination"),
        ("a confirm without its challenge", header("join", join_payload(challenge=bytes(16))), "phub.malformed.handshake"),
        ("join version 3", header("join", b"\x03" + join_payload()[1:]), "phub.malformed.handshake"),
        ("nonfinite on a pull", header("pull", flags=NONFINITE), "phub.malformed.flag_combination"),
        ("hyperparameter set of 50 bytes", header("hparams", hparams_payload(size=50)), "phub.malformed.hparams"),
        ("hyperparameter set of version 2", header("hparams", b"\x02" + hparams_payload()[1:]), "phub.malformed.hparams"),
        ("status on a push", header("push", pay, status=1), "phub.malformed.status"),
        ("reserved nonzero", header("push", pay, reserved=1), "phub.malformed.reserved"),
        ("payload_bytes larger than the datagram", header("push", pay, payload_bytes=64), "phub.malformed.payload_length"),
        ("elem_count disagrees", header("push", pay, count=9), "phub.malformed.elem_count"),
        ("bf16 payload of an odd length", header("push", pay[:15], dtype=2, count=7), "phub.malformed.elem_count"),
        ("payload on a rerequest", header("rerequest", b"\0" * 8), "phub.malformed.unexpected_payload"),
        ("wrong CRC32C", header("push", pay, flags=CRC, crc=0xdeadbeef), "phub.malformed.crc"),
        ("crc flag on a forward", header("fwd_partial", pay, flags=CRC, crc=crc32c(pay)), "phub.malformed.forward"),
        ("fwd_partial in bf16", header("fwd_partial", elements(8, 2), dtype=2), "phub.malformed.forward"),
        ("join of 20 bytes", header("join", bytes(20)), "phub.malformed.handshake"),
        ("joined with payload_mac but no session", header("joined", joined_payload(options=2)), "phub.malformed.handshake"),
        ("redirect with a session", header("joined", joined_payload(options=9, snonce=bytes(16))), "phub.malformed.handshake"),
        ("redirect with a server nonce", header("joined", joined_payload(options=8)), "phub.malformed.handshake"),
        ("hub_state of 64 bytes (before lives)", header("hub_state", bytes(64)), "phub.malformed.hub_state"),
        ("hub_state life 0", header("hub_state", hub_state_payload(life=0)), "phub.malformed.hub_state"),
        ("hub_state nonce 0", header("hub_state", hub_state_payload(nonce=0)), "phub.malformed.hub_state"),
        ("probe body of 8 bytes", header("probe_request", bytes(8)), "phub.malformed.probe"),
    ]


def write_pcap(path, frames, snaplen=65535):
    """A classic microsecond pcap (Ethernet) of the frames, one microsecond apart, each cut to `snaplen` bytes as a
    capture with that snap length holds it."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, snaplen, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 0, i, min(len(fr), snaplen), len(fr)) + fr[:snaplen])

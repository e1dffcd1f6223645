#!/usr/bin/python3
"""Attacks from a host on the server's segment that reads and writes whole Ethernet frames (an AF_PACKET
socket on its "eth0", in promiscuous mode), run inside the attacker's namespace by attack_test.py. For
errors, epochs and tamper the test makes the bridge flood every frame to every port (a hub, or a switch whose
table the attacker overflowed), so the attacker sees the workers' and the server's datagrams; it never holds
a job's secret. On stdout:
"ready" once its socket is open, then one JSON line.

Usage: segment.py ATTACK SERVER_IP PORT JOB_ID [--seconds S] [--victim IP] [--every N] [--workers IP,IP]
                  [--crc-neutral] [--agent ADDR:PORT]
  errors  learn each worker's address, epoch and round of job JOB_ID from the server's answers, then send
          it, while the server answers it, forged `error` packets (source: the server's address and port)
          with a zero or random tag, and replay, byte for byte, the first genuine error it recorded (a
          signed one, of an earlier round)
  epochs  across three runs of job JOB_ID: record pushes, replay them into the next run's epoch to get
          genuine `epoch_mismatch` errors, send those to the third run's workers
  tamper  the path from --victim to the server runs through the attacker (the test drops the victim's
          frames to the server at the bridge): relay them, changing the payload of every Nth push; with
          --crc-neutral, so that its CRC32C stays the same
  replay  record the first --first N frames (default 3) of every worker flow (source address and port) to the
          job's server ports, until a line on stdin; then send all of them again, in a loop, until stdin closes
          (a recording of one run's starts, joins and confirms, replayed while later runs start)
  probe   against a phub-probe agent's control port (--agent ADDR:PORT) without its token: a PROBE flood at
          SERVER_IP:PORT as the first line, a wrong token, a made-up proof; what the agent answered
  arp     1 s of ARP requests for the server's address as fast as Python sends them; then requests from
          group and unspecified sources; then, for --seconds, gratuitous ARP and unsolicited replies that
          claim the --workers' addresses for the attacker's MAC, counting what the server sends to it
"""
import hmac
import json
import os
import secrets
import select
import socket
import struct
import sys
import time

ETH_P_ALL, ETH_P_IP, ETH_P_ARP = 0x0003, 0x0800, 0x0806
SOL_PACKET, PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC, PACKET_OUTGOING = 263, 1, 1, 4
HEADER = struct.Struct("!HBBHBBIHHIIIHHIIQIH")  # docs/protocol.md "Header", 54 bytes
PUSH, RESULT, ERROR = 1, 2, 6
EPOCH_MISMATCH = 6
# Error statuses (docs/protocol.md): round_ahead, round_behind, round_stalled, unknown_chunk, epoch_mismatch,
# bad_request, draining. Every one but round_stalled would end the operation it names if it were believed.
STATUSES = {1: "round_ahead", 2: "round_behind", 3: "round_stalled", 4: "unknown_chunk", 6: "epoch_mismatch",
            7: "bad_request", 8: "draining"}
BROADCAST = b"\xff" * 6


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s >> 16) + (s & 0xffff)
    return ~s & 0xffff


def ip_bytes(ip):
    return socket.inet_aton(ip)


def udp_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload, tos=0):
    """An Ethernet + IPv4 + UDP frame with both checksums right (the server checks the UDP one)."""
    udp_len = 8 + len(payload)
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    csum = checksum(pseudo + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + udp_len, 0x5048, 0x4000, 64, 17, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return dst_mac + src_mac + struct.pack("!H", ETH_P_IP) + ip + udp


def parse_udp(frame):
    """(dst_mac, src_mac, src_ip, dst_ip, sport, dport, udp payload) of an IPv4/UDP frame, else None."""
    if len(frame) < 42 or struct.unpack_from("!H", frame, 12)[0] != ETH_P_IP or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0f) * 4
    total = struct.unpack_from("!H", frame, 16)[0]
    sport, dport, udp_len = struct.unpack_from("!HHH", frame, 14 + ihl)
    payload = frame[14 + ihl + 8:14 + min(total, ihl + udp_len)]
    return frame[0:6], frame[6:12], frame[26:30], frame[30:34], sport, dport, payload


def arp_frame(dst_mac, src_mac, op, sender_mac, sender_ip, target_mac, target_ip):
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, op, sender_mac, sender_ip, target_mac, target_ip)
    return (dst_mac + src_mac + struct.pack("!H", ETH_P_ARP) + body).ljust(60, b"\0")


class Segment:
    """The attacker's eth0, raw: every frame on the segment in, any frame out."""

    def __init__(self, ifname="eth0"):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((ifname, 0))
        index = socket.if_nametoindex(ifname)
        self.sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, struct.pack("iHH8s", index, PACKET_MR_PROMISC, 0, b""))
        self.mac = open("/sys/class/net/%s/address" % ifname).read().strip()
        self.mac = bytes(int(x, 16) for x in self.mac.split(":"))
        self.sent = self.sent_bytes = 0

    def send(self, frame):
        self.sock.send(frame)
        self.sent += 1
        self.sent_bytes += max(len(frame), 60)

    def frames(self, seconds, until_eof=False):
        """Frames received (not our own) for `seconds`; with 0, those already queued (at most 10,000). With
        until_eof, also stops as soon as stdin closes (the test closes it when its workers are done)."""
        end = time.time() + seconds
        drained = 0
        watched = [self.sock] + ([sys.stdin] if until_eof else [])
        while True:
            left = end - time.time()
            if seconds > 0 and left <= 0:
                return
            ready = select.select(watched, [], [], max(left, 0))[0]
            if until_eof and sys.stdin in ready and not sys.stdin.read(1):
                return
            if self.sock not in ready:
                if seconds == 0:
                    return
                continue
            drained += 1
            if seconds == 0 and drained > 10000:
                return
            data, addr = self.sock.recvfrom(65536)
            if addr[2] != PACKET_OUTGOING:
                yield data


def phub_header(payload, job):
    if len(payload) < HEADER.size:
        return None
    h = HEADER.unpack_from(payload)
    return h if h[0] == 0x5048 and h[6] == job else None


def spoof_errors(seg, server, port, job, seconds):
    """Forged errors to each worker of the job, and replays of the first genuine error recorded."""
    server_ip = ip_bytes(server)
    workers = {}  # (ip, udp port) -> {"mac", "rank", "epoch", "round", "chunk", "sport"}
    genuine = None
    genuine_at = 0.0
    genuine_status = []
    forged = {}
    replayed = 0
    last_burst = 0.0
    rand = os.urandom
    end = time.time() + seconds
    while time.time() < end:
        for frame in seg.frames(0.005):
            u = parse_udp(frame)
            if not u or u[2] != server_ip or not port <= u[4] < port + 16:
                continue
            h = phub_header(u[6], job)
            if h is None:
                continue
            w = workers.setdefault((u[3], u[5]), {})
            w.update(mac=u[0], rank=h[7], epoch=h[13], round=h[9], chunk=h[10], sport=u[4], seen=time.time())
            if h[2] == ERROR:
                genuine_status.append(STATUSES.get(h[5], str(h[5])))
                if genuine is None:
                    genuine, genuine_at = frame, time.time()
        now = time.time()
        if now - last_burst < 0.01:
            continue
        last_burst = now
        for (ip, uport), w in workers.items():
            if now - w["seen"] > 0.1:
                continue  # a worker the server no longer answers has probably finished: its port is closed
            for status in STATUSES:
                for rnd in (w["round"], w["round"] + 1):
                    aux = (w["epoch"] + 1) & 0xffff if status == 6 else 0
                    tag = 0 if rnd == w["round"] else struct.unpack("!Q", rand(8))[0]
                    hdr = HEADER.pack(0x5048, 3, ERROR, 0, 0, status, job, w["rank"], 0, rnd, w["chunk"], 0, 0,
                                      w["epoch"], 0, aux, tag, 0, 0)
                    seg.send(udp_frame(w["mac"], seg.mac, server_ip, ip, w["sport"], uport, hdr))
                    forged[STATUSES[status]] = forged.get(STATUSES[status], 0) + 1
        # The recorded genuine error, replayed from 0.3 s after it was seen (an earlier round by then).
        if genuine is not None and now - genuine_at > 0.3:
            seg.send(genuine)
            replayed += 1
    return {"workers": len(workers), "forged": sum(forged.values()), "forged_by_status": forged,
            "replayed": replayed, "genuine_errors_seen": len(genuine_status),
            "genuine_statuses": sorted(set(genuine_status)),
            "replayed_status": STATUSES.get(genuine[14 + 20 + 8 + 7], "?") if genuine else None}


def stale_epochs(seg, server, port, job, seconds):
    """Across runs of one job: records one push per rank of each epoch; once the job is in a later epoch,
    replays them, so that the server answers each with a genuine `epoch_mismatch` naming that epoch (sent
    to the old worker's address, read on the segment); once the job is in a later epoch still, sends those
    recorded headers, unchanged, to the workers now running (the tag covers the header, not the ports)."""
    server_ip = ip_bytes(server)
    pushes = {}   # epoch -> {rank: frame}
    errors = {}   # rank -> (the epoch it names, the genuine header)
    workers = {}  # rank -> where the server sends its results now
    current = None
    replayed = sent = 0
    last = 0.0
    end = time.time() + seconds
    while time.time() < end:
        for frame in seg.frames(0.01):
            u = parse_udp(frame)
            if not u:
                continue
            if u[3] == server_ip and port <= u[5] < port + 16:
                h = phub_header(u[6], job)
                if h is not None and h[2] == PUSH:
                    pushes.setdefault(h[13], {}).setdefault(h[7], frame)
            elif u[2] == server_ip and port <= u[4] < port + 16:
                h = phub_header(u[6], job)
                if h is None:
                    continue
                if h[2] == ERROR and h[5] == EPOCH_MISMATCH:
                    errors.setdefault(h[7], (h[15], u[6][:HEADER.size]))
                elif h[2] == RESULT:
                    current = h[13]
                    workers[h[7]] = dict(mac=u[0], ip=u[3], port=u[5], sport=u[4], seen=time.time())
        now = time.time()
        if current is None or now - last < 0.05:
            continue
        last = now
        if len(errors) < 2:
            for epoch, by_rank in pushes.items():
                if epoch != current:
                    for frame in by_rank.values():
                        seg.send(frame)
                        replayed += 1
        for rank, (named, hdr) in errors.items():
            w = workers.get(rank)
            if w and named != current and now - w["seen"] < 0.2:
                seg.send(udp_frame(w["mac"], seg.mac, server_ip, w["ip"], w["sport"], w["port"], hdr))
                sent += 1
        if sent and all(now - w["seen"] > 1.0 for w in workers.values()):
            break  # the workers it was sent to have stopped
    return {"epochs_recorded": sorted(pushes), "pushes_replayed": replayed, "errors_recorded": len(errors),
            "errors_name": sorted(set(e[0] for e in errors.values())), "errors_sent": sent, "epoch_now": current}


def replay_starts(seg, server, port, job, first, seconds):
    """Records the first `first` frames of each worker flow of the job until stdin has a line (or `seconds`
    passed), then replays every recorded frame, in the order recorded, until stdin closes."""
    server_ip = ip_bytes(server)
    flows = {}  # (ip, udp port) -> [frame, ...]
    order = []
    opcodes = {}
    end = time.time() + seconds
    while time.time() < end:
        if select.select([sys.stdin], [], [], 0)[0]:
            sys.stdin.readline()
            break
        for frame in seg.frames(0.01):
            u = parse_udp(frame)
            if not u or u[3] != server_ip or not port <= u[5] < port + 16:
                continue
            h = phub_header(u[6], job)
            if h is None:
                continue
            kept = flows.setdefault((u[2], u[4]), [])
            if len(kept) < first:
                kept.append(frame)
                order.append(frame)
                opcodes[h[2]] = opcodes.get(h[2], 0) + 1
    sent = loops = answers = answer_bytes = 0
    answered = {}  # opcode -> count, of what the server sent to the recorded flows' addresses
    while not select.select([sys.stdin], [], [], 0)[0]:
        for frame in order:
            seg.send(frame)
            sent += 1
        loops += 1
        for frame in seg.frames(0.002):
            u = parse_udp(frame)
            if not u or u[2] != server_ip or (u[3], u[5]) not in flows:
                continue
            h = phub_header(u[6], job)
            answers += 1
            answer_bytes += max(len(frame), 60)
            if h is not None:
                answered[h[2]] = answered.get(h[2], 0) + 1
    sys.stdin.read()
    return {"flows": len(flows), "recorded": len(order), "opcodes": {str(k): v for k, v in sorted(opcodes.items())},
            "replayed": sent, "loops": loops, "bytes_in": seg.sent_bytes, "answers": answers,
            "answer_bytes": answer_bytes, "answered": {str(k): v for k, v in sorted(answered.items())}}


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data, init=0xffffffff, final=0xffffffff):
    c = init
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >> 8)
    return c ^ final


def crc_neutral(payload):
    """The payload with its second-to-last fp32 element set to 1000 and its last one chosen so that the
    CRC32C stays the same. The CRC is affine in the payload: a change whose own CRC (no init, no final xor)
    is 0 leaves it unchanged, and four free bytes at the end can always cancel the rest."""
    n = len(payload)
    new = bytearray(payload)
    new[n - 8:n - 4] = struct.pack("<f", 1000.0)
    delta = bytes(a ^ b for a, b in zip(new[n - 8:n - 4], payload[n - 8:n - 4]))
    target = crc32c(delta + bytes(4), 0, 0)

    def f(x):
        return crc32c(x.to_bytes(4, "little"), 0, 0)

    basis = {}  # Gaussian elimination over GF(2): f is linear and one-to-one on 32 bits
    for i in range(32):
        v, x = f(1 << i), 1 << i
        while v:
            top = v.bit_length() - 1
            if top not in basis:
                basis[top] = (v, x)
                break
            v, x = v ^ basis[top][0], x ^ basis[top][1]
    x, v = 0, target
    while v:
        bv, bx = basis[v.bit_length() - 1]
        v, x = v ^ bv, x ^ bx
    fix = x.to_bytes(4, "little")
    new[n - 4:n] = bytes(a ^ b for a, b in zip(payload[n - 4:n], fix))
    assert crc32c(bytes(new)) == crc32c(payload)
    return bytes(new)


def tamper(seg, server, port, job, victim, every, seconds, neutral=False):
    """Relays the victim's frames to the server (the bridge no longer forwards them) until stdin closes or
    `seconds` pass, changing the payload of every `every`-th push and leaving its header, tag and CRC field
    as they were: the first element set to 1000, or (neutral) a change that keeps the payload's CRC32C."""
    server_ip, victim_ip = ip_bytes(server), ip_bytes(victim)
    relayed = pushes = altered = 0
    for frame in seg.frames(seconds, until_eof=True):
        u = parse_udp(frame)
        if not u or u[2] != victim_ip or u[3] != server_ip or not port <= u[5] < port + 16:
            continue
        payload = u[6]
        h = phub_header(payload, job)
        if h is not None and h[2] == PUSH and len(payload) > HEADER.size:
            pushes += 1
            if pushes % every == 0:
                if neutral:
                    body = payload[:HEADER.size] + crc_neutral(payload[HEADER.size:])
                else:
                    body = payload[:HEADER.size] + struct.pack("<f", 1000.0) + payload[HEADER.size + 4:]
                frame = udp_frame(u[0], u[1], u[2], u[3], u[4], u[5], body)
                altered += 1
        seg.send(frame)
        relayed += 1
    return {"relayed": relayed, "pushes": pushes, "altered": altered}


def arp_attacks(seg, server, workers, seconds):
    server_ip = ip_bytes(server)
    me = ip_bytes("198.18.0.200")  # an address of the segment nobody holds
    zero = b"\0" * 6

    def replies(seconds, to_macs):
        n = b = 0
        for frame in seg.frames(seconds):
            if len(frame) >= 42 and frame[12:14] == b"\x08\x06" and frame[20:22] == b"\x00\x02" and \
                    frame[28:32] == server_ip and frame[0:6] in to_macs:
                n += 1
                b += max(len(frame), 60)
        return n, b

    # 1. A flood of requests, answers counted while it runs and 0.5 s after.
    request = arp_frame(BROADCAST, seg.mac, 1, seg.mac, me, zero, server_ip)
    got = got_bytes = 0
    end = time.time() + 1.0
    while time.time() < end:
        for _ in range(64):
            seg.send(request)
        n, b = replies(0, [seg.mac])
        got, got_bytes = got + n, got_bytes + b
    n, b = replies(0.5, [seg.mac])
    flood = {"requests": seg.sent, "in": seg.sent_bytes, "replies": got + n, "out": got_bytes + b}
    time.sleep(0.2)  # the token bucket refills (50 tokens in 50 ms)
    # 2. Requests whose answer would go to a group, or whose sender claims no address: never answered.
    group = [b"\x01\x00\x5e\x00\x00\x01", BROADCAST, b"\x33\x33\x00\x00\x00\x01"]
    seg.sent = seg.sent_bytes = 0
    for mac in group:
        seg.send(arp_frame(BROADCAST, mac, 1, mac, me, zero, server_ip))      # frame source a group
        seg.send(arp_frame(BROADCAST, seg.mac, 1, mac, me, zero, server_ip))  # sender hardware a group
    for ip in (b"\0\0\0\0", ip_bytes("224.0.0.1"), ip_bytes("198.18.0.255")):
        seg.send(arp_frame(BROADCAST, seg.mac, 1, seg.mac, ip, zero, server_ip))
    n, b = replies(0.5, group + [seg.mac])
    groups = {"requests": seg.sent, "in": seg.sent_bytes, "replies": n, "out": b}
    # 3. The workers' addresses claimed for our MAC, gratuitously (broadcast) and in replies to the server,
    # every 20 ms; a learning server or one with an ARP cache would send their results here.
    server_mac = None
    for frame in seg.frames(0.3):  # the server's MAC, from its answer to one request
        pass
    seg.send(request)
    for frame in seg.frames(0.3):
        if len(frame) >= 42 and frame[12:14] == b"\x08\x06" and frame[28:32] == server_ip:
            server_mac = frame[22:28]
            break
    seg.sent = seg.sent_bytes = 0
    stolen = stolen_bytes = 0
    end = time.time() + seconds
    while time.time() < end:
        for w in workers:
            wip = ip_bytes(w)
            seg.send(arp_frame(BROADCAST, seg.mac, 1, seg.mac, wip, zero, wip))
            seg.send(arp_frame(BROADCAST, seg.mac, 2, seg.mac, wip, BROADCAST, wip))
            if server_mac:
                seg.send(arp_frame(server_mac, seg.mac, 2, seg.mac, wip, server_mac, server_ip))
        for frame in seg.frames(0.02):
            u = parse_udp(frame)
            if u and u[0] == seg.mac and u[2] == server_ip:
                stolen += 1
                stolen_bytes += len(frame)
    poison = {"claims": seg.sent, "in": seg.sent_bytes, "stolen": stolen, "out": stolen_bytes,
              "server_mac_learned": server_mac is not None}
    return {"flood": flood, "groups": groups, "poison": poison}


def probe_misuse(agent, target, port):
    """Three ways in without the token; each must get a challenge, a refusal and a closed connection."""
    host, ctl_port = agent.rsplit(":", 1)
    flood = "PROBE %s %d 10000 100 1000 1024 0\n" % (target, port)  # 10,000 probes of 1 KiB, 100 us apart
    sent = got = refused = 0
    answers = []
    for attempt in ("no-auth", "wrong-token", "made-up-proof"):
        s = socket.create_connection((host, int(ctl_port)), timeout=10)
        buf = b""
        try:
            while b"\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
            challenge = buf.split(b"\n", 1)[0].decode()
            an = bytes.fromhex(challenge.split()[-1]) if challenge.startswith("PHUB-PROBE 2 CHALLENGE ") else b""
            cn = secrets.token_bytes(32)
            if attempt == "no-auth":
                line = flood.encode()
            elif attempt == "wrong-token":
                proof = hmac.new(b"not-the-token-0123456789abcdef", b"phub-probe 2 initiator" + an + cn, "sha256")
                line = b"AUTH %s %s\n%s" % (cn.hex().encode(), proof.hexdigest().encode(), flood.encode())
            else:
                line = b"AUTH %s %s\n%s" % (cn.hex().encode(), secrets.token_hex(32).encode(), flood.encode())
            s.sendall(line)
            sent += len(line)
            rest = b""
            s.settimeout(5)
            while True:  # read until the agent closes
                chunk = s.recv(4096)
                if not chunk:
                    break
                rest += chunk
            got += len(buf) + len(rest)
            answer = (buf.split(b"\n", 1)[1] + rest).decode(errors="replace").strip()
            answers.append(answer)
            refused += answer.startswith("ERR authentication failed")
        finally:
            s.close()
    return {"attempts": 3, "refused": refused, "answers": answers, "in": sent, "agent_bytes": got}


def main():
    attack, server, port, job = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def opt(name, default):
        return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default

    seconds = float(opt("--seconds", "2"))
    seg = None if attack == "probe" else Segment()
    print("ready", flush=True)  # the test starts its workers only now
    if attack == "errors":
        out = spoof_errors(seg, server, port, job, seconds)
    elif attack == "tamper":
        out = tamper(seg, server, port, job, opt("--victim", ""), int(opt("--every", "8")), seconds,
                     "--crc-neutral" in sys.argv)
    elif attack == "arp":
        out = arp_attacks(seg, server, opt("--workers", "").split(","), seconds)
    elif attack == "epochs":
        out = stale_epochs(seg, server, port, job, seconds)
    elif attack == "replay":
        out = replay_starts(seg, server, port, job, int(opt("--first", "3")), seconds)
    elif attack == "probe":
        out = probe_misuse(opt("--agent", ""), server, port)
    else:
        raise SystemExit("unknown attack " + attack)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

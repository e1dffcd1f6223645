#!/usr/bin/python3
"""A client of phub-probe's agent control channel (app/phub-probe/auth.hpp, control.hpp), for tests.

Module: Session(addr, port, token) does the handshake (HMAC-SHA-256 challenge-response) and then sends and
reads lines that carry their MAC and sequence number. raw_line() and the `forge_*` knobs let tests send what
a real coordinator never would.
CLI:    probe_control.py ADDR PORT COMMAND...   one line per COMMAND, each answer printed on its own line;
        the token comes from PHUB_PROBE_TOKEN. Exit 1 if the handshake fails.
"""
import hashlib
import hmac
import os
import socket
import struct
import sys

CHALLENGE = "PHUB-PROBE 2 CHALLENGE"


def mac(key, *parts):
    h = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        h.update(p)
    return h.digest()


class HandshakeError(Exception):
    pass


class Session:
    def __init__(self, addr, port, token, timeout=10.0, sock=None):
        self.sock = sock or socket.create_connection((addr, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.sent = 0
        self.received = 0
        self.key = None
        if token is not None:
            self.handshake(token.encode() if isinstance(token, str) else token)

    def raw_line(self):
        """One line as it came (b'' when the peer closed)."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                line, self.buf = self.buf, b""
                return line
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def send_raw(self, data):
        self.sock.sendall(data)

    def handshake(self, token):
        challenge = self.raw_line().decode()
        if not challenge.startswith(CHALLENGE + " "):
            raise HandshakeError("no challenge: %r" % challenge)
        an = bytes.fromhex(challenge.split()[-1])
        cn = os.urandom(32)
        self.send_raw(b"AUTH %s %s\n" % (cn.hex().encode(), mac(token, b"phub-probe 2 initiator", an, cn).hex().encode()))
        answer = self.raw_line().decode()
        if not answer.startswith("OK "):
            raise HandshakeError("refused: %r" % answer)
        if not hmac.compare_digest(bytes.fromhex(answer[3:]), mac(token, b"phub-probe 2 agent", an, cn)):
            raise HandshakeError("the agent's proof is wrong")
        self.key = mac(token, b"phub-probe 2 session", an, cn)

    def line_mac(self, direction, seq, text):
        return mac(self.key, direction, struct.pack(">Q", seq), text.encode())

    def send(self, text, forge_mac=False):
        m = self.line_mac(b"i>a", self.sent, text)
        if forge_mac:
            m = bytes(b ^ 0x55 for b in m)
        self.sent += 1
        self.send_raw(m.hex().encode() + b" " + text.encode() + b"\n")

    def recv(self):
        """The next line's text, its MAC checked; None when the agent closed the connection."""
        line = self.raw_line().decode()
        if not line:
            return None
        m, _, text = line.partition(" ")
        if not hmac.compare_digest(bytes.fromhex(m), self.line_mac(b"a>i", self.received, text)):
            raise HandshakeError("bad MAC from the agent on %r" % line)
        self.received += 1
        return text

    def call(self, text):
        self.send(text)
        return self.recv()

    def closed(self, wait=2.0):
        """True if the agent has closed the connection (reads end within `wait` seconds)."""
        self.sock.settimeout(wait)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def main():
    addr, port, commands = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    try:
        s = Session(addr, port, os.environ.get("PHUB_PROBE_TOKEN", ""))
    except (HandshakeError, OSError) as e:
        print("handshake failed: %s" % e, file=sys.stderr)
        return 1
    for c in commands:
        print(s.call(c))
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""tshark with phub's dissector (tools/wireshark/phub.lua) over a pcap: every packet's fields (PDML), what is wrong
with each (malformed items, expert errors and warnings, Lua errors, frames without phub), and the opcode counts."""
import collections
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
DISSECTOR = os.path.abspath(os.path.join(HERE, "..", "..", "..", "tools", "wireshark", "phub.lua"))
SEVERITY_WARN = 0x00600000  # Wireshark's expert severities: note 0x00400000, warn 0x00600000, error 0x00800000
GROUP_MALFORMED = 0x07000000
OPCODE_NAMES = {1: "push", 2: "result", 3: "rerequest", 4: "fwd_partial", 5: "fwd_result", 6: "error", 7: "join",
                8: "leave", 9: "probe_request", 10: "probe_reply", 11: "init", 12: "pull", 13: "joined",
                14: "hub_state", 15: "fwd_init"}


class Packet:
    """One packet of tshark's PDML: its protocols, every field's shown values by name, and its expert items."""

    def __init__(self, elem):
        self.protos = [p.get("name") for p in elem.iter("proto")]
        self.fields = collections.defaultdict(list)
        self.experts = []  # (abbrev, severity, group, message)
        for fl in elem.iter("field"):
            name = fl.get("name")
            self.fields[name].append(fl.get("show"))
            if name == "_ws.expert":
                sub = {c.get("name"): c.get("show") for c in fl}
                abbrev = next((n for n in sub if not n.startswith("_ws.")), "?")
                self.experts.append((abbrev, int(sub.get("_ws.expert.severity", "0")),
                                     int(sub.get("_ws.expert.group", "0")), sub.get("_ws.expert.message", "")))
        self.number = int(self.first("frame.number") or 0)

    def first(self, name):
        v = self.fields.get(name)
        return v[0] if v else None

    def problems(self):
        """What is wrong with this packet's decoding: empty when it decoded cleanly as phub."""
        out = []
        if "phub" not in self.protos:
            out.append("not decoded as phub (protocols %s)" % ",".join(self.protos))
        if "_ws.malformed" in self.protos or "_ws.malformed" in self.fields:
            out.append("malformed")
        if "_ws.lua.error" in self.fields:  # a dissector that raised (_ws.lua.fake is only a placeholder item)
            out.append("Lua error")
        for abbrev, severity, group, message in self.experts:
            if severity >= SEVERITY_WARN or group == GROUP_MALFORMED:
                out.append("%s: %s" % (abbrev, message))
        return out

    def opcode(self):
        v = self.first("phub.opcode")
        return None if v is None else OPCODE_NAMES.get(int(v), "opcode %s" % v)


def available():
    """A reason tshark cannot run here, or None."""
    if not shutil.which("tshark"):
        return "tshark is not installed (tools/setup.sh installs Debian's tshark)"
    if not os.path.exists(DISSECTOR):
        return "no dissector at %s" % DISSECTOR
    return None


def packets(pcap, extra=(), timeout_s=120):
    """(exit status, stderr, [Packet]) of tshark decoding `pcap` with the dissector; extra: more tshark options."""
    r = subprocess.run(["tshark", "-n", "-r", pcap, "-X", "lua_script:" + DISSECTOR, "-T", "pdml"] + list(extra),
                       capture_output=True, text=True, timeout=timeout_s)
    pkts = []
    if r.stdout.strip():
        pkts = [Packet(p) for p in ET.fromstring(r.stdout).iter("packet")]
    err = "\n".join(ln for ln in r.stderr.splitlines() if "Running as user" not in ln)
    return r.returncode, err, pkts


def opcode_counts(pkts):
    return dict(collections.Counter(p.opcode() for p in pkts if p.opcode() is not None))

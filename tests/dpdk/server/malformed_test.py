#!/usr/bin/python3
"""DPDK test (issue 3 "Tests"): malformed packets (truncated, lying lengths, bad dtype, huge element counts,
an invalid opcode and an opcode a server never receives) are counted under their own names, exactly as
many as were sent, and the server keeps serving: a second step without them completes rounds correctly."""
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import server, testing  # noqa: E402

FAULTS = {"truncated": "malformed_ipv4_bad_total_length", "lying_length": "malformed_payload_length_mismatch",
          "bad_dtype": "malformed_bad_dtype", "huge_count": "malformed_elem_count_mismatch",
          "bad_opcode": "malformed_bad_opcode", "wrong_opcode": "unexpected_opcode"}

SCENARIO = """
local inject = {}
for i, kind in ipairs({%s}) do inject[kind] = 10 + i end
local first = pktgen.run{ duration = 1, inject = inject }
pktgen.check(first.mismatches == 0, "mismatches while malformed packets flew")
local second = pktgen.run{ duration = 1, inject = {} }
pktgen.check(second.rounds > 0, "no rounds after the malformed packets")
pktgen.check(second.mismatches == 0, "mismatches after the malformed packets")
pktgen.result("rounds_after", second.rounds)
"""


def body(a, t):
    with tempfile.TemporaryDirectory(prefix="phub-malformed-") as d:
        scenario = os.path.join(d, "malformed.lua")
        with open(scenario, "w") as f:
            f.write(SCENARIO % ", ".join('"%s"' % k for k in FAULTS))
        r = testing.run_pair(a, "malformed", [server.job(1, "victim", 4, 60000, secret="v-1"),
                                              server.job(2, "bystander", 2, 20000, dtype="bf16", reduce="mean")],
                             ["-f", scenario])
    t.equal("pktgen exit status", r.status, 0)
    t.equal("server exit status", r.server_status, 0)
    s = r.summary
    if not t.check("summary", s is not None):
        return
    t.check("scenario checks", s["ok"] and not s["failures"], str(s["failures"]))
    sent = s["steps"][0]["faults_sent"]
    drops = r.counters["drops"]
    for i, (fault, counter) in enumerate(FAULTS.items()):
        t.equal("%s sent" % fault, sent[fault], 11 + i)
        t.equal("server counted %s as %s" % (fault, counter), drops.get(counter), 11 + i)
    t.equal("no other drops", {k: v for k, v in drops.items() if k not in FAULTS.values()}, {})
    t.check("rounds after the malformed packets", s["results"].get("rounds_after", 0) > 0)


if __name__ == "__main__":
    sys.exit(testing.main("malformed packets", body))

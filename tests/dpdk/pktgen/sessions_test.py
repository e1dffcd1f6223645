#!/usr/bin/python3
"""DPDK test: phub-pktgen drives session jobs, the default protection of every job with a secret, against the
real phub-server over net_memif (docs/protocol.md, "Sessions"). Two server lcores, two jobs (an fp32 allreduce
mean and a bf16 ps Adam job whose pushes name their hyperparameter set): every rank joins every lcore with the
two-message handshake (rank 0 first, starting the epoch), seals every push, and opens every result.

1. Sessions, then sessions with payload MACs: every result verified, every step settled, the server drops
   nothing and established one session per (rank, lcore), the generator refused no answer, and the push bytes
   the server accepted are the bytes whose results the generator received.
2. A generator with another secret than the server's: its joins are dropped as bad tags, and it fails naming
   the rank and the lcore that did not answer, the server untouched.
3. A generator told that a job runs sessions where the server runs it with the job key only: it fails saying so.
4. Job descriptions it refuses before any packet: sessions without a secret, payload MACs without sessions, a
   CRC with sessions, and a trace (a replay by design) of a session job.
"""
import tempfile
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench", "lib"))
from phubbench import pktgen, server, testing  # noqa: E402

SECRET_1 = "pktgen-sessions-secret-one"
SECRET_2 = "pktgen-sessions-secret-two"
LCORES = 2
TAIL_BYTES = 8  # proto::kTailBytes


def jobs(payload_mac):
    return [
        server.job(1, "sess-fp32", 4, 120000, secret=SECRET_1, sessions=True, payload_mac=payload_mac, reduce="mean"),
        server.job(2, "sess-ps-bf16", 2, 30000, dtype="bf16", mode="ps", secret=SECRET_2, sessions=True,
                   payload_mac=payload_mac, optimizer={"kind": "adam", "lr": 0.01}),
    ]


def verified_run(a, t, payload_mac):
    name = "payload MACs" if payload_mac else "sessions"
    r = testing.run_pair(a, "sess" + ("mac" if payload_mac else ""), jobs(payload_mac), ["--rounds", "20", "--hparams"],
                         lcores=LCORES)
    t.equal("%s: pktgen exit status" % name, r.status, 0)
    t.equal("%s: phub-server exit status" % name, r.server_status, 0)
    s = r.summary
    if not t.check("%s: pktgen wrote a summary" % name, s is not None):
        return
    steps = s["steps"]
    t.equal("%s: mismatches" % name, sum(x["mismatches"] for x in steps), 0)
    t.check("%s: every step settled" % name, all(x["settled"] for x in steps))
    t.check("%s: results verified" % name, sum(x["results_ok"] for x in steps) > 0)
    t.equal("%s: answers the generator refused (bad tag, replayed)" % name,
            sum(x["rx_bad_tag"] + x["rx_replayed"] for x in steps), 0)
    t.equal("%s: server drops" % name, r.counters["drops"], {})
    for job, workers in (("sess-fp32", 4), ("sess-ps-bf16", 2)):
        c = r.counters["jobs"].get(job, {})
        t.equal("%s: %s: sessions established (ranks x lcores)" % (name, job), c.get("sessions_established"),
                workers * LCORES)
        t.check("%s: %s: rounds completed" % (name, job), c.get("rounds_completed", 0) > 0, str(c))
    # The ps job's pushes carry the 8-byte tail that names their hyperparameter set (registered under rank 0's
    # sessions): the server counts it in the payload, the generator's answered bytes are the elements.
    accepted = sum(j["push_payload_bytes"] for j in r.counters["jobs"].values())
    tails = TAIL_BYTES * r.counters["jobs"].get("sess-ps-bf16", {}).get("pushes", 0)
    answered = sum(x["answered_bytes"] for x in steps)
    t.equal("%s: server accepted bytes == generator answered bytes + hyperparameter tails" % name, accepted,
            answered + tails)
    t.equal("%s: hyperparameter sets registered (3 copies per lcore)" % name,
            r.counters["jobs"].get("sess-ps-bf16", {}).get("hparams_registered"), 3 * LCORES)
    t.check("%s: the generator says what it joined" % name,
            "job 1: 8 sessions (4 ranks x 2 server lcores)%s" % (", payload MACs" if payload_mac else "") in r.err,
            r.err[-800:])


def body(a, t):
    verified_run(a, t, payload_mac=False)
    verified_run(a, t, payload_mac=True)

    # Another secret than the server's: the server drops every join (bad tag) and answers none.
    wrong = "id=1,workers=4,keys=120000,port_base=40100,reduce=mean,secret=not-the-servers-secret,sessions=1"
    r = testing.run_pair(a, "sesswrong", jobs(False)[:1], ["--job", wrong, "--rounds", "1"], lcores=LCORES, timeout=90)
    t.equal("wrong secret: pktgen exit status", r.status, 1)
    t.equal("wrong secret: phub-server exit status", r.server_status, 0)
    t.check("wrong secret: names the rank and the lcore",
            "rank 0 did not join server lcore 0 (UDP port 40100): no answer" in r.err, r.err[-600:])
    t.check("wrong secret: the server counted the joins as bad tags", r.counters["drops"].get("bad_tag", 0) > 0,
            str(r.counters["drops"]))

    # The server runs the job with the job key's tags only (sessions = false, insecure = true).
    keyed = [server.job(1, "keyed", 2, 1000, secret=SECRET_1, sessions=False, insecure=True)]
    said = "id=1,workers=2,keys=1000,port_base=40100,secret=%s,sessions=1" % SECRET_1
    r = testing.run_pair(a, "sesskeyed", keyed, ["--job", said, "--rounds", "1"], lcores=LCORES, timeout=90)
    t.equal("no sessions on the server: pktgen exit status", r.status, 1)
    t.check("no sessions on the server: said so", "the server runs it without sessions" in r.err, r.err[-600:])

    refusals(a, t)


def refusals(a, t):
    base = "id=1,workers=2,keys=1000"
    with tempfile.TemporaryDirectory(prefix="phub-sessions-") as d:
        trace = os.path.join(d, "t.pcap")
        for spec, said in (("sessions=1", "sessions=1 needs a secret"),
                           ("secret=%s,payload_mac=1" % SECRET_1, "payload_mac=1 needs sessions=1"),
                           ("secret=%s,sessions=1,crc=1" % SECRET_1, "a session packet carries no CRC"),
                           ("secret=%s,sessions=1" % SECRET_1, "runs sessions: a trace cannot carry session packets")):
            status, _, err = pktgen.offline(a.pktgen, ["--job", base + "," + spec, "--write-pcap", trace], timeout=60)
            t.check("refused: %s (exit %s)" % (spec, status), status != 0 and said in err, err[-400:])
            t.check("refused: %s: no trace written" % spec, not os.path.exists(trace))


if __name__ == "__main__":
    sys.exit(testing.main("phub-pktgen drives session jobs over net_memif", body))

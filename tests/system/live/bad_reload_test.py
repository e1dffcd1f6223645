#!/usr/bin/python3
"""Bad reloads change nothing and say why (issue 14), against the real phub-server on af_packet.

The server runs jobs A and B; A's two ranks of phub-demo-worker run through all of it, every result element
verified. Then twelve bad configs are sent with `phub-ctl reload FILE`: Lua that does not parse or fails when
run, configs that fail validation (a duplicate job id, a secret of the wrong type, overlapping UDP ports),
changes that need a restart (a job's workers, keys, dtype, mode; the lcores; the ports), two jobs that
cannot both be admitted (each within its quota, together over limits.memory_bytes) and an include() of a
file outside the config's directory. Each must exit 1 with a message on stderr that names the field and the
reason, and leave `phub-ctl config` the same byte for byte. A good reload afterwards must still apply; it
takes B's rate limit from an included file, and reloading the same config after that file changed must
apply the new value (a reload reads included files again) while `phub-ctl config` stays one table; reloading
what `phub-ctl config` printed must change nothing, and one that shortens control.metrics_interval_ms (from an
hour to 50 ms) must take effect at once.
Usage: bad_reload_test.py --build BUILD_DIR   (root; removes namespaces, processes and files, also on failure)
"""
import os
import re
import sys
import time

import livenet
from livenet import phubnet

KEYS = [20000, 3000, 1]
A = phubnet.job(1, "A", 2, KEYS, 42100, secret="a-secret-0123456")
B = phubnet.job(2, "B", 2, KEYS, 42200, rate_limit_pps=500000)


def changed(j, **fields):
    out = dict(j)
    out.update(fields)
    return out


def cases(net, good):
    """(what, config text, [fragments stderr must hold]) for each bad config."""
    cfg = lambda jobs: net.config_text(jobs)  # noqa: E731
    # Each within its quota (by default limits.memory_bytes, 384 MiB here), together over the limit.
    big = [phubnet.job(3, "C", 2, [24_000_000], 42300), phubnet.job(5, "E", 2, [24_000_000], 42500)]
    return [
        ("Lua syntax error", good.rstrip().rstrip("}"), ["reload-01.lua:", "'}' expected"]),
        ("Lua runtime error", good.replace("return {", "local t = os.time()\nreturn {", 1),
         ["reload-02.lua:2:", "attempt to index a nil value (global 'os')"]),
        ("duplicate job id", cfg([A, B, phubnet.job(1, "C", 2, KEYS, 42300)]), ["jobs[3].id: 1 is used twice (jobs[1])"]),
        ("secret of the wrong type", cfg([A, changed(B, secret=12345)]), ["jobs[2].secret: expected string, got number"]),
        ("overlapping UDP ports", cfg([A, B, phubnet.job(3, "C", 2, KEYS, 42200)]),
         ["jobs[3].port_base: ports 42200..42200 overlap jobs[2]"]),
        ("a job's workers", cfg([A, changed(B, workers=3)]), ["jobs[2].workers: changing workers needs a restart"]),
        ("a job's keys", cfg([A, changed(B, keys=[dict(name="k0", elems=20001)] + B["keys"][1:])]),
         ["jobs[2].keys: changing keys needs a restart"]),
        ("a job's dtype", cfg([A, changed(B, dtype="bf16")]), ["jobs[2].dtype: changing the dtype needs a restart"]),
        ("a job's mode", cfg([A, changed(B, mode="ps")]), ["jobs[2].mode: changing the mode needs a restart"]),
        ("the lcores", good.replace("lcores = { { id = 1,", "lcores = { { id = 2,", 1),
         ["lcores: changing lcores needs a restart"]),
        ("the ports", good.replace("mtu = 1500", "mtu = 1400", 1), ["ports: changing ports", "needs a restart"]),
        ("jobs over limits.memory_bytes", cfg([A, B] + big),
         ["jobs[4]: job 'E' (id 5) refused: it needs", "limits.memory_bytes", "would be exceeded"]),
        ("an include outside the config's directory", good.replace("return {", "local x = include('../x.lua')\nreturn {", 1),
         ["reload-13.lua:2: include \"../x.lua\": a path with \"..\""]),
    ]


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    with phubnet.Net(2, build_dir=build, lcores=1) as net:
        net.start_server([A, B], timeout_s=120)
        ctl = livenet.Ctl(net)
        good = open(net.config_path).read()
        traffic = livenet.start_workers(net, "A", [0, 1], ["--seconds", "8"], net.config_path, 60)
        before = ctl.config()
        for n, (what, text, expect) in enumerate(cases(net, good), 1):
            path = livenet.write(os.path.join(net.tmp, "reload-%02d.lua" % n), text)
            rc, out, err = ctl("reload", path)
            after = ctl.config()
            named = all(f in err for f in expect)
            check("bad reload %2d (%s): exit 1, the field and the reason on stderr" % (n, what),
                  rc == 1 and named and out == "",
                  "exit %d, expected %s on stderr:\n%s" % (rc, expect, (err + out)[-800:]))
            print("    " + " | ".join(line.strip() for line in err.splitlines()[1:])[:240], flush=True)
            check("bad reload %2d (%s): running config unchanged byte for byte" % (n, what), after == before,
                  "config changed: %d bytes before, %d after" % (len(before), len(after)))
        rc, status, _ = ctl("status")
        check("status counts 13 refused reloads", rc == 0 and "0 applied, 13 refused" in status, status.strip())
        check("status names the last refusal's reason", re.search(r"; last: reload of \S+reload-13\.lua refused, the running config is "
                                                        r"unchanged: \S+reload-13\.lua:2: include \"\.\./x\.lua\": ", status),
              status.strip())
        bigger_b = phubnet.job(2, "B", 2, KEYS, 42200, rate_limit_pps=400000)
        text = net.config_text([A, bigger_b]).replace("rate_limit_pps = 400000", "rate_limit_pps = include('rate.lua')")
        path = livenet.write(os.path.join(net.tmp, "reload-good.lua"), text)
        livenet.write(os.path.join(net.tmp, "rate.lua"), "return 400000\n")
        rc, out, err = ctl("reload", path)
        check("a good reload afterwards applies (B's rate limit, from an included file)",
              rc == 0 and "changed 1 (B)" in out, "exit %d: %s" % (rc, (out + err).strip()[-400:]))
        livenet.write(os.path.join(net.tmp, "rate.lua"), "return 300000\n")
        rc, out, err = ctl("reload", path)
        dumped = ctl.config(show_secrets=True)
        check("reloading the same config reads the changed included file again",
              rc == 0 and "changed 1 (B)" in out and "rate_limit_pps = 300000" in dumped,
              "exit %d: %s" % (rc, (out + err).strip()[-400:]))
        check("phub-ctl config is one table, without include", "include" not in dumped, dumped[:400])
        redacted = ctl.config()
        check("phub-ctl config prints no secret", "<redacted: give the job's secret>" in redacted and
              all(j.get("secret", "") not in redacted for j in (A, bigger_b) if j.get("secret")), redacted[:400])
        rc, out, err = ctl("reload", livenet.write(os.path.join(net.tmp, "redacted.lua"), redacted))
        check("its output does not reload: the redacted secrets are named", rc != 0 and "secret: redacted" in err,
              "exit %d: %s" % (rc, (out + err).strip()[-400:]))
        # What `phub-ctl config --show-secrets` prints is a config: reloading it changes nothing and prints the same.
        path = livenet.write(os.path.join(net.tmp, "dumped.lua"), dumped)
        rc, out, err = ctl("reload", path)
        check("reloading the output of phub-ctl config --show-secrets changes nothing",
              rc == 0 and "applied: added 0, changed 0, removed 0, unchanged 2;" in out and ctl.config(show_secrets=True) == dumped,
              "exit %d: %s" % (rc, (out + err).strip()[-400:]))
        ok, detail = livenet.workers_ok(livenet.finish_workers(traffic, 60))
        check("A's traffic meanwhile: every result verified", ok, detail)
        # control.metrics_interval_ms changes in place: from an hour to 50 ms, the samples come every 50 ms at once.
        interval = re.search(r"metrics_interval_ms = \d+", dumped).group(0)
        for n, ms in ((1, 3600000), (2, 50)):
            path = livenet.write(os.path.join(net.tmp, "interval-%d.lua" % n),
                                 dumped.replace(interval, "metrics_interval_ms = %d" % ms))
            rc, out, err = ctl("reload", path)
            check("a reload sets control.metrics_interval_ms = %d" % ms, rc == 0 and "server settings changed" in out,
                  "exit %d: %s" % (rc, (out + err).strip()[-400:]))
            if n == 1:  # the sample due under the old interval is taken: the next one is due in an hour
                time.sleep(int(interval.split("= ")[1]) / 1000 + 0.3)
            first = ctl.stats()["sample"]
        time.sleep(1.0)
        later = ctl.stats()["sample"]
        check("after it, counter samples come every 50 ms (%d in 1 s)" % (later - first), later - first >= 10,
              "sample %d, then %d one second later" % (first, later))
        stats = ctl.stats()
        a_drops = {k: v for k, v in livenet.job_of(stats, "A")["drops"].items() if v}
        check("A: no drops counted against it", not a_drops, "drops %s" % a_drops)
        if check.failed:
            print(open(net.server_log).read()[-3000:])
        net.stop_server()
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Torn checkpoint files are skipped at start, each with its log line, and the one before is restored.

A ps job (Adam, two ranks of phub-demo-worker) runs three times for 3, 5 and 7 rounds, each run followed by
`phub-ctl checkpoint ps`: files of rounds 2, 4 and 6. The second and third runs start with fresh weights, so
each sets the earlier run's files aside (docs/persistence.md, "Run lineage"): round 2's goes, round 4's is
left as *.superseded, round 6's is the job's. The server stops. Then:
- the newest file damaged (cut in its blocks, one byte flipped, left under its temporary name as by a write
  that never reached its rename): one line skips it with the reason, and the server starts without state:
  round 4 is of a run that a fresh-weights run replaced, and is never resurrected;
- the same, after an operator renamed round 4's file back on purpose: round 4 is restored.
phub-ctl checkpoint answers why not for an allreduce job.
Usage: torn_test.py --build BUILD_DIR   (root; removes namespaces, processes and files, also on failure)
"""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

KEYS = [30000, 2000]


def ckpt_name(rnd):
    return "ps.s0.r%010d.phubckpt" % rnd


def run_ps(net, rounds, fresh):
    args = ["--rounds", str(rounds)] + (["--fresh-weights"] if fresh else [])
    procs = livenet.start_workers(net, "ps", [0, 1], args, net.config_path, 90)
    return livenet.workers_ok(livenet.finish_workers(procs, 100))


def restore_lines(log):
    return [line for line in log.splitlines() if "job 'ps'" in line and ("checkpoint skipped" in line
                                                                       or "restored" in line
                                                                       or "no valid checkpoint" in line)]


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    with phubnet.Net(2, build_dir=build, lcores=2) as net:
        ckdir = os.path.join(net.tmp, "ckpt")
        os.mkdir(ckdir, 0o700)  # the server refuses a checkpoint directory others can write to
        jobs = [phubnet.job(1, "ar", 2, KEYS, 42100),
                phubnet.job(2, "ps", 2, KEYS, 42200, mode="ps", optimizer=dict(kind="adam", lr=0.01),
                            checkpoint=dict(dir=ckdir, keep=5))]
        net.start_server(jobs, timeout_s=200)
        ctl = livenet.Ctl(net)
        first = restore_lines(open(net.server_log).read())
        check("an empty directory: starts without state", len(first) == 1 and "no valid checkpoint" in first[0],
              "\n".join(first))
        for n, rounds in enumerate([3, 5, 7]):
            ok, detail = run_ps(net, rounds, n > 0)
            check("ps run of %d rounds" % rounds, ok, detail)
            rc, out, err = ctl("checkpoint", "ps")
            want = "checkpoint of round %d" % (rounds - 1)
            check("phub-ctl checkpoint ps after it: round %d" % (rounds - 1), rc == 0 and want in out
                  and ckpt_name(rounds - 1) in out, (out + err).strip())
        rc, out, err = ctl("checkpoint", "ar")
        check("phub-ctl checkpoint of an allreduce job says why not",
              rc == 1 and "is an allreduce job: only ps jobs keep state to checkpoint" in err, (out + err).strip())
        net.stop_server()
        files = sorted(os.listdir(ckdir))
        check("the third run's file, and the second's set aside (the first's removed)",
              files == [ckpt_name(4) + ".superseded", ckpt_name(6)], str(files))
        superseded = re.findall(r"a run with fresh weights started: (\d+) checkpoint file", open(net.server_log).read())
        check("each fresh-weights run said how many files it set aside", superseded == ["1", "1"], str(superseded))
        pristine = os.path.join(net.tmp, "pristine")
        shutil.copytree(ckdir, pristine)
        newest = os.path.join(ckdir, ckpt_name(6))
        size = os.path.getsize(newest)

        def truncate():
            with open(newest, "r+b") as f:
                f.truncate(size // 2)

        def flip():
            with open(newest, "r+b") as f:
                f.seek(size // 2)
                b = f.read(1)
                f.seek(size // 2)
                f.write(bytes([b[0] ^ 0x10]))

        def unrenamed():
            os.rename(newest, newest + ".tmp")

        damages = [("truncated", truncate, r"torn|ends past the file|shorter"),
                   ("a flipped byte", flip, r"CRC32C mismatch|inflate|corrupt"),
                   ("a missing rename", unrenamed, r"never reached its rename")]
        for renamed_back in (False, True):
            for what, damage, reason in damages:
                shutil.rmtree(ckdir)
                shutil.copytree(pristine, ckdir)
                if renamed_back:
                    os.rename(os.path.join(ckdir, ckpt_name(4) + ".superseded"), os.path.join(ckdir, ckpt_name(4)))
                damage()
                net.start_server(jobs, timeout_s=60)
                _, log = net.stop_server()
                lines = restore_lines(log)
                skipped = [l for l in lines if "checkpoint skipped" in l]
                restored = [l for l in lines if "restored the state after round 4 " in l and ckpt_name(4) in l]
                none = [l for l in lines if "no valid checkpoint" in l]
                ok = (len(skipped) == 1 and ckpt_name(6) in skipped[0] and re.search(reason, skipped[0]) is not None
                      and (len(restored) == 1 if renamed_back else (not restored and len(none) == 1)))
                check("%s newest file: skipped with its line, %s" % (
                    what, "round 4 restored once renamed back" if renamed_back
                    else "the superseded run's round 4 not resurrected"), ok, "\n    ".join(lines))
                for line in lines:
                    print("    " + line.split("phub: ", 1)[-1], flush=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""kill -9 of the server during real PyTorch training in ps mode (Adam); the workers resume from the restored
round by themselves, and end with the weights of an uninterrupted run restarted from the same checkpoint.

Two ranks (resume_worker.py, one process per namespace, phub.torch.PSOptimizer) train the training test's
MLP for STEPS steps on a ps job whose server runs Adam and checkpoints every EVERY rounds. Once rank 1 has
done KILL_AT steps it is stopped (SIGSTOP), so that rank 0 is in the middle of the next step, its pushes
summed on the server and waiting for rank 1's; then the phub-server gets SIGKILL. The checkpoint directory
is copied as it is, the server starts again on it at once, and rank 1 goes on (SIGCONT). The server
restores the newest checkpoint (round R); both workers, still running, get phub.Resumed in the step they
were in (rank 0 in the one it had pushed, rank 1 in the next it pushes), with round R + 1 and the restored
weights in their parameters, repeat the steps from R + 1 and finish. Then the reference: a server started
on the copy (it restores R too) and a new run of both ranks, which starts at round R + 1 by itself (no
restart of the job at round 0) and trains to STEPS without a fault. Asserted: the final parameters are
equal bit for bit; each rank of the killed run resumed exactly once, at round R + 1, in the step after the
last one it had done at the kill; the reference started at R + 1 and never resumed; every step the killed
run did twice had the same loss both times, and the same loss as the reference's from R + 1 on.
Usage: resume_test.py --build BUILD_DIR   (root; removes namespaces, processes and files, also on failure)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
sys.path.insert(0, os.path.join(HERE, "..", "training"))
import livenet  # noqa: E402
import train_model  # noqa: E402
from livenet import phubnet  # noqa: E402

STEPS = 200      # steps of the training
EVERY = 20       # checkpoint.every_rounds
KILL_AT = 70     # rank 1's steps done when it is stopped and the server killed
PACE_MS = 20     # each worker sleeps this long after a step: time to kill mid-run on a busy machine
WORKERS = 2
JOB_ID, PORT_BASE, SECRET = 5, 42500, "resume-test"
WORKER_TIMEOUT_S = 240


def start_run(net, tag, master_port):
    """Both ranks of one run, not waited for."""
    env = {"PYTHONPATH": os.path.join(net.build, "lib", "client", "python"), "PHUB_SERVER": phubnet.SERVER_IP,
           "PHUB_PORT_BASE": str(PORT_BASE), "PHUB_JOB": str(JOB_ID), "PHUB_LCORES": str(net.lcores),
           "PHUB_SECRET": SECRET, "PHUB_TIMEOUT_MS": "30000", "MASTER_ADDR": phubnet.worker_ip(0),
           "MASTER_PORT": str(master_port), "WORLD_SIZE": str(WORKERS), "GLOO_SOCKET_IFNAME": "eth0",
           "OMP_NUM_THREADS": "1"}
    procs = []
    for rank in range(WORKERS):
        argv = ["timeout", str(WORKER_TIMEOUT_S), "/usr/bin/python3", os.path.join(HERE, "resume_worker.py"),
                "--steps", str(STEPS), "--out", net.tmp, "--tag", tag, "--progress", progress_file(net, tag),
                "--pace-ms", str(PACE_MS)]
        procs.append(net.popen(rank, argv, env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT))
    return procs


def progress_file(net, tag):
    """The prefix of the ranks' pid and progress files."""
    return os.path.join(net.tmp, "progress-" + tag)


def progress(net, tag, rank):
    """The last step rank `rank` has done (-1: none yet)."""
    try:
        return int(open("%s-r%d" % (progress_file(net, tag), rank)).read())
    except (OSError, ValueError):
        return -1


def finish_run(procs):
    """(every rank exited 0, their output)."""
    outs = []
    for p in procs:
        text, _ = p.communicate(timeout=WORKER_TIMEOUT_S + 30)
        outs.append("rank exit %d:\n%s" % (p.returncode, text[-2500:]))
    return all(p.returncode == 0 for p in procs), "\n".join(outs)


def wait_progress(net, tag, rank, procs, steps, timeout_s=120):
    """Waits until rank `rank` has done `steps` steps; the last step done then, or None (timeout, a worker
    ended)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and all(p.poll() is None for p in procs):
        done = progress(net, tag, rank)
        if done + 1 >= steps:
            return done
        time.sleep(0.002)
    return None


def restart_server(net, log_name):
    """A new phub-server process on the same config (and checkpoint directory); the round it restored, or None."""
    net.server_log = os.path.join(net.tmp, log_name)
    net.server = net.launch_server(net.ns_server(), net.config_path, net.server_log, 600)
    m = re.search(r"job 'adam' \(id %d\): restored the state after round (\d+) " % JOB_ID, open(net.server_log).read())
    return int(m.group(1)) if m else None


def records(net, tag):
    return [json.load(open(os.path.join(net.tmp, "record-%s-r%d.json" % (tag, r)))) for r in range(WORKERS)]


def main():
    build, check, root = livenet.begin()
    if not root:
        return check.summary()
    import torch
    t_start = time.time()
    with phubnet.Net(WORKERS, build_dir=build, lcores=2) as net:
        ckdir = os.path.join(net.tmp, "ckpt")
        os.mkdir(ckdir, 0o700)  # the server refuses a checkpoint directory others can write to
        job = phubnet.job(JOB_ID, "adam", WORKERS, train_model.key_list(), PORT_BASE, mode="ps", reduce="mean",
                          secret=SECRET, optimizer=dict(kind="adam", lr=0.001),
                          checkpoint=dict(dir=ckdir, every_rounds=EVERY, keep=100))
        net.start_server([job], timeout_s=600)

        # The run that loses its server.
        procs = start_run(net, "killed", 29610)
        done1 = wait_progress(net, "killed", 1, procs, KILL_AT)
        check("the training reached step %d" % KILL_AT, done1 is not None,
              "" if done1 is not None else finish_run(procs)[1] if all(p.poll() is not None for p in procs) else "")
        if done1 is None:
            return check.summary()
        rank1 = int(open(progress_file(net, "killed") + "-r1.pid").read())
        os.kill(rank1, signal.SIGSTOP)
        done1 = progress(net, "killed", 1)
        # Rank 0 catches up and pushes the next step, which cannot complete without rank 1.
        done0 = wait_progress(net, "killed", 0, procs, done1 + 1, timeout_s=30)
        time.sleep(0.3)
        stuck = done0 is not None and progress(net, "killed", 0) == done0
        net.signal_server(signal.SIGKILL)
        t_kill = time.time()
        net.server.wait(timeout=20)
        at_kill = os.path.join(net.tmp, "at-kill")
        shutil.copytree(ckdir, at_kill)
        files = sorted(os.listdir(at_kill))
        restored = restart_server(net, "server-restarted.log")
        t_ready = time.time()
        os.kill(rank1, signal.SIGCONT)
        check("at the kill rank 0 was in step %s, waiting for rank 1 (stopped after step %d)"
              % (None if done0 is None else done0 + 1, done1), stuck, "rank 0 had done step %s" % done0)
        if done0 is None:
            return check.summary()
        check("the restarted server restored a checkpoint of this run", restored is not None and restored < STEPS,
              "restored round %s; files at the kill: %s" % (restored, files))
        ok, out = finish_run(procs)
        t_done = time.time()
        check("the killed run's workers finished training", ok, "" if ok else out)
        net.stop_server()
        if restored is None or not ok:
            return check.summary()
        killed = records(net, "killed")

        # The reference: the same checkpoint, a new run, no fault.
        shutil.rmtree(ckdir)
        shutil.copytree(at_kill, ckdir)
        again = restart_server(net, "server-reference.log")
        check("the reference server restored the same round", again == restored, "%s vs %s" % (again, restored))
        ok, out = finish_run(start_run(net, "reference", 29620))
        check("the reference run finished training", ok, "" if ok else out)
        net.stop_server()
        if not ok:
            return check.summary()
        reference = records(net, "reference")
        resume_round = restored + 1

        for r, (rec, at) in enumerate(zip(killed, (done0 + 1, done1 + 1))):
            resumes = rec["resumes"]
            ok = (rec["start"] == 0 and len(resumes) == 1 and resumes[0]["round"] == resume_round
                  and resumes[0]["at"] == at and rec["stats"]["resumes"] == 1)
            check("killed run, rank %d: started at 0, resumed once, in step %d, at round %d" % (r, at, resume_round),
                  ok, json.dumps(dict(start=rec["start"], resumes=resumes, client_resumes=rec["stats"]["resumes"])))
        for r, rec in enumerate(reference):
            check("reference, rank %d: started at round %d by itself, never resumed" % (r, resume_round),
                  rec["start"] == resume_round and not rec["resumes"] and rec["stats"]["resumes"] == 0,
                  "start %d, resumes %s" % (rec["start"], rec["resumes"]))
        redone = {r: [s for s, ls in rec["losses"].items() if len(ls) > 1] for r, rec in enumerate(killed)}
        same_twice = all(ls[0] == ls[-1] for rec in killed for ls in rec["losses"].values())
        check("every repeated step had the same loss both times", same_twice,
              "steps done twice per rank: %s" % {r: len(s) for r, s in redone.items()})
        tail = [all(rec["losses"][str(s)][-1] == ref["losses"][str(s)][0] for s in range(resume_round, STEPS))
                and sorted(map(int, ref["losses"])) == list(range(resume_round, STEPS))
                for rec, ref in zip(killed, reference)]
        check("losses from round %d on equal the reference's" % resume_round, all(tail), str(tail))
        a = torch.load(os.path.join(net.tmp, "params-killed.pt"))
        b = torch.load(os.path.join(net.tmp, "params-reference.pt"))
        same = a.dtype == b.dtype and a.shape == b.shape and a.numpy().tobytes() == b.numpy().tobytes()
        check("final weights equal the reference's bit for bit (%d parameters)" % a.numel(), same,
              "" if same else "max |difference| %.3g, %d elements differ" % (float((a - b).abs().max()),
                                                                           int((a != b).sum())))
        print("RESUME restored round %d (checkpoints at the kill: %s); killed in step %d; resumed in steps %s; "
              "steps repeated per rank %s; kill to ready %.2f s, to the end of training %.1f s; reference %.1f s; "
              "test %.0f s" % (restored, ", ".join(files), done0 + 1, [rec["resumes"][0]["at"] for rec in killed],
                               [len(s) for s in redone.values()], t_ready - t_kill, t_done - t_kill,
                               reference[0]["seconds"], time.time() - t_start), flush=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

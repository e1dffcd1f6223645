#!/usr/bin/python3
"""A torch.optim recipe in parameter-server mode across racks (issue 30; docs/hierarchy.md, "Parameter-server
jobs"): the two-rack testbed of tworacks.py, a phub-server per rack hub, one rank per rack, each talking only to
its own rack's hub. The AdamW recipe of tests/system/training (two parameter groups, warmup then cosine decay,
an inf in rank 1's gradient at 4 steps) runs through PSOptimizer: the hyperparameter sets reach the chunks' homes
(fwd_hparams) and every round's set id and declaration travel with the partials, so the weights stay within TOL
of torch's AdamW on the mean gradient at every one of 300 steps, the same 4 steps are skipped with the weights
unchanged, and the hubs count the sets they were sent and the skipped rounds. PSOptimizer.state_dict() is refused
by name (the optimizer's state stays at the chunks' homes, which workers do not reach).
Usage: hier_recipe_test.py --build BUILD_DIR   (root; everything torn down, also on failure)"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.join(HERE, "..", "training")
sys.path.insert(0, TRAINING)
import recipe_model as rm  # noqa: E402
import tworacks  # noqa: E402
from hierbed import testbed  # noqa: E402
from livenet import phubnet  # noqa: E402

TOL = 1e-5
SECRET = "hier-recipe-secret-1"
JOB_ID, PORT_BASE = 71, 43000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    results = []

    def check(name, ok, detail=""):
        results.append(bool(ok))
        print("%s %-64s %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    import torch  # noqa: F401  (the model's keys)
    keys = rm.group_keys(rm.make_model())
    job = phubnet.job(JOB_ID, "hier", 2, keys, PORT_BASE, mode="ps", reduce="mean", secret=SECRET,
                      optimizer=rm.RECIPES["adamw-warmup-cosine"]["job_optimizer"],
                      allowed_sources=["198.18.%d.0/24" % r for r in tworacks.RACKS])
    start = time.time()
    with tworacks.TwoRacks(a.build, job, tag="hr") as bed:
        bed.start_hubs()
        env = {"PYTHONPATH": os.path.join(a.build, "lib", "client", "python"), "PHUB_SECRET": SECRET,
               "PHUB_LCORES": "1", "PHUB_TIMEOUT_MS": "30000", "PHUB_JOB_HIER": "%d:%d" % (JOB_ID, PORT_BASE),
               "MASTER_ADDR": "198.18.1.11", "MASTER_PORT": "29711", "WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "eth0",
               "OMP_NUM_THREADS": "1"}
        procs = []
        for rank, rack in enumerate(tworacks.RACKS):
            e = dict(os.environ, **env, RANK=str(rank), PHUB_SERVER=bed.hubs[rack]["addr"])
            procs.append(bed.tb.popen(bed.tb.ns_host(rack, 1), [
                "timeout", "300", "/usr/bin/python3", os.path.join(TRAINING, "recipe_worker.py"), "--phase", "hier",
                "--out", bed.tmp], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=330)[0] for p in procs]
        ok = all(p.returncode == 0 for p in procs)
        check("both ranks finish the recipe", ok, "" if ok else " | ".join(o[-1500:] for o in outs))
        counters = {}
        for r in tworacks.RACKS:
            check("hub %d stops cleanly" % r, bed.stop_hub(r) == 0)
            counters[r] = bed.counters(r).get("job hier", {})
        if ok:
            expect = list(rm.INF_STEPS)
            for rank in range(2):
                rec = json.load(open(os.path.join(bed.tmp, "hier-rank%d.json" % rank)))[0]
                check("rank %d: within %g of torch's AdamW at every step" % (rank, TOL), rec["max_diff"] <= TOL,
                      "max |param difference| %.3g" % rec["max_diff"])
                check("rank %d: the injected steps skipped, as torch's run" % rank,
                      rec["skipped"] == expect and rec["ref_skipped"] == expect,
                      "phub %s, torch %s" % (rec["skipped"], rec["ref_skipped"]))
                check("rank %d: a skipped step leaves the weights unchanged (bits)" % rank, rec["unchanged"])
                check("rank %d: state_dict across racks is refused by name, at once" % rank,
                      rec["state_dict"].startswith("protocol after") and float(rec["state_dict"].split()[2]) < 5,
                      rec["state_dict"][:160])
        for r in tworacks.RACKS:
            c = counters[r]
            check("hub %d: sets registered, partials exchanged, skipped rounds counted" % r,
                  c.get("hparams_registered", 0) > 0 and c.get("partials_received", 0) > 0 and
                  c.get("rounds_skipped", 0) > 0,
                  "hparams_registered %d, partials_received %d, rounds_skipped %d" % (
                      c.get("hparams_registered", 0), c.get("partials_received", 0), c.get("rounds_skipped", 0)))
    passed = sum(results)
    print("hier recipe test: %d passed, %d failed in %.0fs" % (passed, len(results) - passed, time.time() - start))
    print("SUBTESTS passed=%d failed=%d" % (passed, len(results) - passed))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

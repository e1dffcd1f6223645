#!/usr/bin/python3
"""Real torch.optim recipes in parameter-server mode (issue 30), 2 ranks in network namespaces, real PyTorch.

Checks (each can fail; every figure printed):
  recipes      AdamW with two parameter groups (no decay on biases and norms) under linear warmup then cosine
               decay, and SGD + Nesterov under MultiStepLR, with an inf in rank 1's gradient at 4 steps: phub ps
               (PSOptimizer, the server's optimizer) stays within TOL of torch's optimizer on the mean gradient
               at every one of 300 steps; the same 4 steps are skipped on both; a skipped step leaves the weights
               bit for bit unchanged and halves the loss scale of the GradScaler-style loop; the server counts
               the declarations and the skipped rounds. The DDP hook (phub allreduce) stays within TOL of gloo DDP
               under the AdamW recipe, skipping the same steps.
  schedulers   every torch.optim.lr_scheduler class (and a hand-written group["lr"] change) drives PSOptimizer
               and torch.optim.SGD (momentum, which CyclicLR and OneCycleLR cycle) to the same lr and momentum,
               and the weights stay within 1e-6 of torch's.
  checkpoint   Adam, deterministic job: 100 steps, torch.save of model, optimizer (PSOptimizer.state_dict: the
               server's moments and step count) and scheduler; the server stopped with no server checkpoint and
               a fresh one booted; load_state_dict; 100 more steps: the weights equal an uninterrupted 200-step
               run's bit for bit, on every rank.
  mismatch     a rank that names other hyperparameters than the others gets PHUB_ERR_HPARAMS (hparams).
Usage: recipe_test.py --build BUILD_DIR   (root; cleans up every namespace and process)
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client"))
sys.path.insert(0, HERE)
import phubnet  # noqa: E402
import recipe_model as rm  # noqa: E402

WORLD = 2
TOL = 1e-5
SECRET = "recipe-test-secret-1"
JOBS = {"adamw-warmup-cosine": (61, 42000), "sgd-nesterov-multistep": (62, 42010), "hook": (63, 42020),
        "sched": (64, 42030), "ckpt": (65, 42040), "mismatch": (66, 42050)}


def jobs():
    import torch  # noqa: F401  (recipe_model needs it to build the model)
    model = rm.make_model()
    out = []
    for name, r in rm.RECIPES.items():
        jid, port = JOBS[name]
        out.append(phubnet.job(jid, name, WORLD, rm.group_keys(model), port, mode="ps", reduce="mean",
                               secret=SECRET, optimizer=r["job_optimizer"]))
    jid, port = JOBS["hook"]
    out.append(phubnet.job(jid, "hook", WORLD, rm.model_keys(model), port, reduce="mean", secret=SECRET))
    jid, port = JOBS["sched"]
    out.append(phubnet.job(jid, "sched", 1, [64], port, mode="ps", secret=SECRET, optimizer=dict(kind="momentum")))
    jid, port = JOBS["ckpt"]
    out.append(phubnet.job(jid, "ckpt", WORLD, rm.model_keys(model), port, mode="ps", reduce="mean", secret=SECRET,
                           deterministic=True, optimizer=dict(kind="adam")))
    jid, port = JOBS["mismatch"]
    out.append(phubnet.job(jid, "mismatch", WORLD, [1000], port, mode="ps", reduce="mean", secret=SECRET,
                           optimizer=dict(kind="adam", adamw=True)))
    return out


def env_of(net):
    e = {"PYTHONPATH": os.path.join(net.build, "lib", "client", "python"), "PHUB_SERVER": phubnet.SERVER_IP,
         "PHUB_LCORES": str(net.lcores), "PHUB_TIMEOUT_MS": "30000", "PHUB_SECRET": SECRET,
         "MASTER_ADDR": phubnet.worker_ip(0), "MASTER_PORT": "29611", "WORLD_SIZE": str(WORLD),
         "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
    for name, (jid, port) in JOBS.items():
        e["PHUB_JOB_" + name.upper().replace("-", "_")] = "%d:%d" % (jid, port)
    return e


def run(net, argv, ranks, env, timeout=300):
    procs = [net.popen(r, ["timeout", str(timeout), "/usr/bin/python3"] + argv,
                       env=dict(env, RANK=str(r), WORLD_SIZE=str(len(ranks))), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT) for r in ranks]
    outs = []
    for r, p in zip(ranks, procs):
        text, _ = p.communicate(timeout=timeout + 30)
        outs.append((p.returncode, text))
    return outs


def phase(net, name, out, results, ranks=range(WORLD)):
    t0 = time.time()
    outs = run(net, [os.path.join(HERE, "recipe_worker.py"), "--phase", name, "--out", out], list(ranks), env_of(net))
    ok = all(rc == 0 for rc, _ in outs)
    print("phase %s: %.0f s%s" % (name, time.time() - t0, "" if ok else ", FAILED"), flush=True)
    if not ok:
        for r, (rc, text) in zip(ranks, outs):
            print("rank %d exited %d:\n%s" % (r, rc, text[-3000:]), flush=True)
        results.append(False)
        return None
    return [json.load(open(os.path.join(out, "%s-rank%d.json" % (name, r)))) for r in ranks]


def check(results, name, ok, detail=""):
    results.append(bool(ok))
    print("%s %-62s %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


def check_recipes(per_rank, counters, results):
    expect = list(rm.INF_STEPS)
    for rank, recipes in enumerate(per_rank):
        for rec in recipes:
            name = "%s rank %d" % (rec["recipe"], rank)
            check(results, name + ": within %g of torch at every step" % TOL, rec["max_diff"] <= TOL,
                  "max |param difference| %.3g" % rec["max_diff"])
            check(results, name + ": the injected steps skipped, as torch's run", rec["skipped"] == expect and
                  rec["ref_skipped"] == expect, "phub %s, torch %s" % (rec["skipped"], rec["ref_skipped"]))
            if "unchanged" in rec:
                check(results, name + ": a skipped step leaves the weights unchanged (bits)", rec["unchanged"])
                halved = all(rec["scales"][s] == rec["scales"][s - 1] / 2 for s in expect)
                check(results, name + ": the loss scale halves at each skipped step", halved,
                      "scale at the skips %s" % [rec["scales"][s] for s in expect])
    for name in rm.RECIPES:
        c = counters.get("job " + name, {})
        check(results, "server %s: declarations and skipped rounds counted" % name,
              c.get("nonfinite_declared", 0) > 0 and c.get("rounds_skipped", 0) > 0 and c.get("hparams_registered", 0) > 0,
              "nonfinite_declared %d, rounds_skipped %d, hparams_registered %d" % (
                  c.get("nonfinite_declared", 0), c.get("rounds_skipped", 0), c.get("hparams_registered", 0)))
    c = counters.get("job hook", {})
    check(results, "server hook: non-finite sums counted", c.get("nonfinite_sums", 0) > 0,
          "nonfinite_sums %d" % c.get("nonfinite_sums", 0))


def check_schedulers(res, results):
    print("schedulers tested: %s" % ", ".join(res), flush=True)
    for name, r in res.items():
        check(results, "scheduler %s drives PSOptimizer as torch.optim.SGD" % name,
              r["same_settings"] and r["max_rel_diff"] <= 1e-6 and r["distinct_lrs"] >= 2,
              "lrs %s, max relative difference %.3g" % (["%.4g" % x for x in r["lrs"]], r["max_rel_diff"]))


def check_ckpt(net, out, results):
    import torch
    for rank in range(WORLD):
        full = torch.load(os.path.join(out, "weights-ckpt-full-rank%d.pt" % rank))
        second = torch.load(os.path.join(out, "weights-ckpt-second-rank%d.pt" % rank))
        check(results, "checkpoint rank %d: 100 + 100 steps across a fresh server == 200 steps (bits)" % rank,
              torch.equal(full, second), "max |difference| %.3g" % float((full - second).abs().max()))


def check_mismatch(net, results):
    """Two ranks of one round with different learning rates: refused with the named error, never averaged."""
    script = ("import phub, phub.torch, torch, os\n"
              "p = torch.nn.Parameter(torch.zeros(1000))\n"
              "lr = 1e-3 if os.environ['RANK'] == '0' else 2e-3\n"
              "jid, port = os.environ['PHUB_JOB_MISMATCH'].split(':')\n"
              "opt = phub.torch.PSOptimizer([p], 'adamw', lr=lr, job=int(jid), port_base=int(port), timeout_ms=5000)\n"
              "p.grad = torch.ones(1000)\n"
              "try:\n    opt.step()\n    print('STEP OK')\nexcept phub.PhubError as e:\n    print('ERROR', e.name, e)\n")
    outs = run(net, ["-c", script], list(range(WORLD)), env_of(net), timeout=60)
    texts = [t for _, t in outs]
    named = sum("ERROR hparams" in t for t in texts)
    check(results, "different hyperparameters in one round: PHUB_ERR_HPARAMS, not averaged", named >= 1 and
          not any("STEP OK" in t for t in texts), " | ".join(t.strip().splitlines()[-1][:160] for t in texts if t.strip()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("recipe test: needs root (namespaces, af_packet)")
        return 1
    results, start = [], time.time()
    with phubnet.Net(WORLD, build_dir=a.build) as net:
        js = jobs()
        net.start_server(js, timeout_s=900)
        out = net.tmp
        recipes = phase(net, "recipes", out, results)
        sched = phase(net, "schedulers", out, results, ranks=[0])
        full = phase(net, "ckpt-full", out, results)
        first = phase(net, "ckpt-first", out, results)
        check_mismatch(net, results)
        counters, log = net.stop_server()
        if recipes:
            check_recipes(recipes, counters, results)
        if sched:
            check_schedulers(sched[0], results)
        if first:
            check(results, "state_dict holds the server's Adam state in torch's layout",
                  first[0]["state_keys"] == ["exp_avg", "exp_avg_sq", "step"] and first[0]["state_step"] == 100.0,
                  "keys %s, step %s" % (first[0]["state_keys"], first[0]["state_step"]))
        # A fresh server: nothing of the job on it but what load_state_dict installs.
        net.start_server(js, timeout_s=900)
        second = phase(net, "ckpt-second", out, results)
        net.stop_server()
        if full and second:
            check_ckpt(net, out, results)
        if not all(results):
            print(log[-3000:])
    passed = sum(results)
    print("recipe test: %d passed, %d failed in %.0fs" % (passed, len(results) - passed, time.time() - start))
    print("SUBTESTS passed=%d failed=%d" % (passed, len(results) - passed))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

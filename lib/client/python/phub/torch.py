"""PyTorch integration of phub: a DDP communication hook, a ps-mode optimizer, and the Lua keys of a model.

    state = phub.torch.HookState(ddp_model)                  # phub.Client.from_env() inside
    ddp_model.register_comm_hook(state, phub.torch.ddp_comm_hook)

The server job's keys are the model's trainable parameters in order (print them with lua_keys(model) or
`python3 -m phub.keys module:factory`), so they do not depend on how DDP groups gradients into buckets.
"""
import os
import queue
import random
import threading

import torch

from .client import Client, buffer_of
from .errors import Resumed


def trainable(model):
    """(name, parameter) of every trainable parameter, in the order phub registers them (DDP is unwrapped)."""
    module = getattr(model, "module", model)
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad]


def lua_keys(model):
    """The `keys = {...}` entry of a phub job for this model (paste it into the server's Lua config)."""
    lines = ["keys = {  -- %d tensors, %d elements" % (len(trainable(model)), sum(p.numel() for _, p in trainable(model)))]
    for name, p in trainable(model):
        lines.append('  { name = "%s", elems = %d },' % (name, p.numel()))
    lines.append("},")
    return "\n".join(lines)


_JOB_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _for_this_run(overrides):
    """Client settings with a run token shared by every rank of this run (drawn by rank 0 and broadcast over
    the default torch.distributed group), so that the workers join only the job epoch their own rank 0
    starts, never one of an earlier run. Without a process group (or with PHUB_RUN_TOKEN set) nothing is
    added."""
    if "run_token" in overrides or os.environ.get("PHUB_RUN_TOKEN"):
        return overrides
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return overrides
    token = [random.SystemRandom().randrange(1, 1 << 32) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(token, src=0)
    return dict(overrides, run_token=token[0])


def _wait_all(reqs):
    """Waits for every request, then raises the first error: after a failure the others still send from and
    write into their buffers until they end, so those buffers may be reused only once all have ended."""
    error = None
    for r in reqs:
        try:
            r.wait()
        except Exception as e:  # a PhubError
            error = error or e
    if error is not None:
        raise error


class _Completer(threading.Thread):
    """Waits for the requests of each submitted batch in order and completes its future (daemon thread)."""

    def __init__(self):
        super().__init__(name="phub-hook", daemon=True)
        self.jobs = queue.Queue()
        self.start()

    def run(self):
        while True:
            item = self.jobs.get()
            if item is None:
                return
            reqs, finish, fut = item
            try:
                _wait_all(reqs)
                fut.set_result(finish())
            except Exception as e:  # a PhubError, delivered to whoever waits on the future
                fut.set_exception(e)


class HookState:
    """State of phub.torch.ddp_comm_hook: the client (from the environment unless given) and the key of each
    parameter. The job's reduce may be "mean" (the server divides) or "sum" (the hook divides)."""

    def __init__(self, model, client=None, **client_overrides):
        self.client = client or Client.from_env(**_for_this_run(client_overrides))
        params = [p for _, p in trainable(model)]
        self.key_of = {}
        for p in params:
            self.key_of[p.data_ptr()] = self.client.register(p.numel())
        self.divide = self.client.workers if self.client.reduce == "sum" else 1
        self.job_dtype = _JOB_DTYPES[self.client.dtype]
        self._staging = {}  # bucket index -> _Staging, reused by the bucket's next call
        self._completer = _Completer()

    def close(self):
        self._completer.jobs.put(None)
        self.client.close()


class _Staging:
    """The memory one bucket's requests own: `snapshot` (the job's dtype) is what is pushed and where the results
    land; `result` (the bucket's dtype) is the future's value, `snapshot` itself when the dtypes agree."""

    def __init__(self, buf, job_dtype):
        self.snapshot = torch.empty(buf.numel(), dtype=job_dtype)
        self.result = self.snapshot if job_dtype == buf.dtype else torch.empty(buf.numel(), dtype=buf.dtype)
        self.future = None

    def fits(self, buf):
        """Reusable for this call: same size and dtype, and the bucket's previous future has completed (DDP copies
        a future's value into the gradients before it runs the hook for that bucket again)."""
        return (self.result.numel() == buf.numel() and self.result.dtype == buf.dtype
                and (self.future is None or self.future.done()))


def ddp_comm_hook(state, bucket):
    """DDP communication hook: allreduces the bucket's gradients through phub. The bucket is copied once, when
    the hook is called, into staging memory the requests own (reused by the same bucket's next call), so DDP
    may rewrite the bucket as soon as the hook returns: pushes and retransmits read the copy, results are
    written into it, and the future's value is that copy (in the bucket's dtype, divided by W for a "sum" job)."""
    buf = bucket.buffer()
    stage = state._staging.get(bucket.index())
    if stage is None or not stage.fits(buf):
        stage = _Staging(buf, state.job_dtype)
        state._staging[bucket.index()] = stage
    fut = torch.futures.Future()
    stage.future = fut  # set first: if posting fails midway, requests already posted keep this staging
    snapshot = stage.snapshot
    snapshot.copy_(buf)  # the one copy (a dtype conversion when the job's dtype differs)
    reqs = []
    elem = buf.element_size()
    for p, g in zip(bucket.parameters(), bucket.gradients()):
        offset = (g.data_ptr() - buf.data_ptr()) // elem  # the gradient's range of the flat bucket
        reqs.append(state.client.allreduce_async(snapshot.narrow(0, offset, g.numel()), key=state.key_of[p.data_ptr()]))

    def finish():
        result = stage.result
        if result is not snapshot:
            result.copy_(snapshot)
        if state.divide != 1:
            result.div_(state.divide)
        return result

    state._completer.jobs.put((reqs, finish, fut))
    return fut


class PSOptimizer(torch.optim.Optimizer):
    """Parameter-server mode: step() pushes the gradients and receives the weights the server's optimizer
    computed (the job's `optimizer` in the server config), in place. No DDP needed: give it the plain model's
    parameters. Rank 0's parameters become the initial weights unless the server has some for the job (a
    restored checkpoint, or a restart that keeps them); every rank then receives the server's.

    `round` is the job round of the next step(): 0 on a new job, the round after the checkpoint's when the
    server restored the job from one, and one more after every step(). A training loop starts at it. If the
    server restarts mid-run and restores a checkpoint, step() puts the restored weights into the parameters
    and raises phub.Resumed: the loop continues from `round` (also the exception's `round`):

        step = opt.round
        while step < steps:
            loss_fn(model(batch(step))).backward()
            try:
                opt.step()
            except phub.Resumed:
                step = opt.round        # repeat the steps the server lost, on the restored weights
                continue
            step += 1
    """

    def __init__(self, params, client=None, init=True, **client_overrides):
        super().__init__(params, {})
        self.client = client or Client.from_env(mode="ps", **_for_this_run(client_overrides))
        self._params = [p for group in self.param_groups for p in group["params"]]
        job_dtype = _JOB_DTYPES[self.client.dtype]
        self._stage = [p.dtype != job_dtype for p in self._params]
        self._weights = [torch.empty(p.numel(), dtype=job_dtype) if s else None for p, s in zip(self._params, self._stage)]
        self._zeros = {}
        for p in self._params:
            self.client.register(p.numel())
        self.round = 0
        if init:
            self._init()
            self.round = self.client.start_round()

    def _flat(self, k):
        p = self._params[k]
        return self._weights[k] if self._stage[k] else p.data.view(-1)

    @torch.no_grad()
    def _init(self):
        for k, p in enumerate(self._params):
            if self._stage[k]:
                self._weights[k].copy_(p.data.view(-1))
        self.client.init([self._flat(k) for k in range(len(self._params))])
        self._copy_back()

    @torch.no_grad()
    def _resume(self):
        """After the server restored the job: the round to go on from, and its weights in the parameters."""
        self.round = self.client.start_round()
        for k in range(len(self._params)):
            self.client.pull(self._flat(k), k)
        self._copy_back()

    def _copy_back(self):
        for k, p in enumerate(self._params):
            if self._stage[k]:
                p.data.view(-1).copy_(self._weights[k])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        reqs, resumed = [], None
        try:
            for k, p in enumerate(self._params):
                g = p.grad
                if g is None:  # every rank must push every key each step
                    g = self._zeros.setdefault(k, torch.zeros(p.numel(), dtype=self._flat(k).dtype))
                g = g.reshape(-1).to(self._flat(k).dtype).contiguous()
                reqs.append(self.client.step_async(self._flat(k), g, key=k))
        except Resumed as e:  # the resume was found while posting: the requests posted fail with it too
            resumed = e
        try:
            _wait_all(reqs)
        except Resumed as e:
            resumed = resumed or e
        if resumed is not None:
            self._resume()
            resumed.round = self.round
            raise resumed
        self._copy_back()
        self.round += 1
        return loss


__all__ = ["HookState", "ddp_comm_hook", "PSOptimizer", "Resumed", "lua_keys", "trainable", "buffer_of"]

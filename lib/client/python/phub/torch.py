"""PyTorch integration of phub: a DDP communication hook, a ps-mode optimizer, and the Lua keys of a model.

    state = phub.torch.HookState(ddp_model)                  # phub.Client.from_env() inside
    ddp_model.register_comm_hook(state, phub.torch.ddp_comm_hook)

The server job's keys are the model's trainable parameters in order (print them with lua_keys(model) or
`python3 -m phub.keys module:factory`), so they do not depend on how DDP groups gradients into buckets.
"""
import contextlib
import inspect
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
    """The `keys = {...}` entry of a phub job (paste it into the server's Lua config): a model's trainable
    parameters (the DDP hook's keys), or an optimizer's parameters in param_groups order (PSOptimizer's keys;
    the names are the groups' positions where the optimizer does not know the model's)."""
    if isinstance(model, torch.optim.Optimizer):
        named = [("group%d.%d" % (g, i), p) for g, group in enumerate(model.param_groups)
                 for i, p in enumerate(group["params"])]
    else:
        named = trainable(model)
    lines = ["keys = {  -- %d tensors, %d elements" % (len(named), sum(p.numel() for _, p in named))]
    for name, p in named:
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


class _Device:
    """Staging between a device and the host for one device type: pinned host buffers, a side stream for the
    copies and events to wait for them on CUDA; plain buffers, the current thread and no-op events on the CPU,
    so that the CPU runs the same staging code the GPU does."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device=device) if self.cuda else None

    def host_buffer(self, numel, dtype):
        return torch.empty(numel, dtype=dtype, pin_memory=self.cuda)

    def side(self):
        """Where the copies run: the side stream, once it has waited for the work queued on the caller's stream
        (the tensors to copy come from there), on CUDA; nothing special on the CPU."""
        if not self.cuda:
            return contextlib.nullcontext()
        self.stream.wait_stream(torch.cuda.current_stream(self.stream.device))
        return torch.cuda.stream(self.stream)

    def event(self):
        """A point in the side stream's work to wait for (CUDA), or one that is always reached (CPU)."""
        if not self.cuda:
            return _Reached()
        e = torch.cuda.Event()
        e.record(self.stream)
        return e

    def settle(self):
        """The caller's stream waits for the side stream's copies (into the device tensors)."""
        if self.cuda:
            torch.cuda.current_stream(self.stream.device).wait_stream(self.stream)

    def drain(self):
        """The side stream's copies are done (its host buffers may be written again)."""
        if self.cuda:
            self.stream.synchronize()


class _Reached:
    @staticmethod
    def synchronize():
        pass


_TORCH_CLASSES = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
# Options of the torch classes that phub's server does not implement: refused unless at their default.
_UNSUPPORTED = {"dampening": 0, "maximize": False, "amsgrad": False}


def _optimizer_kwargs(optimizer, kwargs):
    """Split keyword arguments into the torch optimizer's (checked and completed with torch's own defaults by
    building that optimizer on a dummy tensor) and the client's."""
    cls = _TORCH_CLASSES[optimizer]
    names = set(inspect.signature(cls.__init__).parameters) - {"self", "params"}
    ours = {k: v for k, v in kwargs.items() if k in names}
    rest = {k: v for k, v in kwargs.items() if k not in names}
    defaults = cls([torch.zeros(1, requires_grad=True)], **ours).defaults  # raises as torch would
    return defaults, rest


class _Completer(threading.Thread):
    """Runs each submitted bucket in order (daemon thread): waits for its copy to the host, posts its requests,
    waits for them and completes its future."""

    def __init__(self):
        super().__init__(name="phub-hook", daemon=True)
        self.jobs = queue.Queue()
        self.start()

    def run(self):
        while True:
            item = self.jobs.get()
            if item is None:
                return
            exchange, fut = item
            try:
                fut.set_result(exchange())
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
        self._devices = {}
        self._completer = _Completer()

    def device(self, d):
        if d not in self._devices:
            self._devices[d] = _Device(d)
        return self._devices[d]

    def close(self):
        self._completer.jobs.put(None)
        self.client.close()


class _Staging:
    """The memory one bucket's requests own: `snapshot` (a host buffer in the job's dtype: pinned for a CUDA
    bucket) is what is pushed and where the results land; `result` (the bucket's dtype and device) is the
    future's value, `snapshot` itself for a CPU bucket of the job's dtype."""

    def __init__(self, buf, job_dtype, dev):
        self.snapshot = dev.host_buffer(buf.numel(), job_dtype)
        same = job_dtype == buf.dtype and buf.device.type == "cpu"
        self.result = self.snapshot if same else torch.empty(buf.numel(), dtype=buf.dtype, device=buf.device)
        self.future = None

    def fits(self, buf):
        """Reusable for this call: same size, dtype and device, and the bucket's previous future has completed (DDP
        copies a future's value into the gradients before it runs the hook for that bucket again)."""
        return (self.result.numel() == buf.numel() and self.result.dtype == buf.dtype
                and self.result.device == buf.device and (self.future is None or self.future.done()))


def ddp_comm_hook(state, bucket):
    """DDP communication hook: allreduces the bucket's gradients through phub. The bucket is copied once, when
    the hook is called, into staging memory the requests own (reused by the same bucket's next call), so DDP
    may rewrite the bucket as soon as the hook returns: pushes and retransmits read the copy, results are
    written into it, and the future's value is that copy (in the bucket's dtype and on its device, divided by W
    for a "sum" job). A CUDA bucket's copies run on a side stream into pinned memory: the next bucket's copy
    overlaps this one's exchange; the CPU runs the same code with plain buffers."""
    buf = bucket.buffer()
    dev = state.device(buf.device)
    stage = state._staging.get(bucket.index())
    if stage is None or not stage.fits(buf):
        stage = _Staging(buf, state.job_dtype, dev)
        state._staging[bucket.index()] = stage
    fut = torch.futures.Future()
    stage.future = fut  # set first: if posting fails midway, requests already posted keep this staging
    snapshot = stage.snapshot
    with dev.side():
        snapshot.copy_(buf, non_blocking=dev.cuda)  # the one copy (a dtype conversion when the job's dtype differs)
        copied = dev.event()
    elem = buf.element_size()
    pieces = [((g.data_ptr() - buf.data_ptr()) // elem, g.numel(), state.key_of[p.data_ptr()])  # in the flat bucket
              for p, g in zip(bucket.parameters(), bucket.gradients())]

    def exchange():
        copied.synchronize()
        reqs = []
        try:
            for offset, numel, key in pieces:
                reqs.append(state.client.allreduce_async(snapshot.narrow(0, offset, numel), key=key))
        finally:
            _wait_all(reqs)
        result = stage.result
        with dev.side():
            if result is not snapshot:
                result.copy_(snapshot, non_blocking=dev.cuda)
            if state.divide != 1:
                result.div_(state.divide)
            done = dev.event()
        done.synchronize()
        return result

    state._completer.jobs.put((exchange, fut))
    return fut


class PSOptimizer(torch.optim.Optimizer):
    """Parameter-server mode: step() pushes the gradients and receives the weights the server's optimizer
    computed, in place. No DDP needed: give it the plain model's parameters (or parameter groups).

    It takes the arguments of the torch optimizer the job's `optimizer` names, and param_groups behave as
    torch's do, so torch.optim.lr_scheduler drives the server's optimizer (docs/training.md):

        opt = phub.torch.PSOptimizer([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                                     "adamw", lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-4, total_steps=1000)

    `optimizer` is "sgd" (the job's optimizer kind sgd, momentum or nesterov), "adam" or "adamw". Each step
    sends each group's values with the round (registered once per set), and the server applies exactly those,
    per key. Without `optimizer` the server's configured optimizer and values apply, and the groups carry no
    hyperparameters. The job's keys are the parameters in param_groups order (lua_keys(opt) prints them).

    Non-finite gradients: step() declares NaN or Inf it finds (one pass; check_finite=False turns it off), or
    what GradScaler's step() or a found_inf argument says; the server then skips the round for every rank
    (weights, moments and step count unchanged), and `last_step_skipped` says so. With torch's GradScaler
    (CUDA), step() unscales through it and GradScaler.update() lowers the scale as after any skipped step.

    state_dict() holds the server's optimizer state in the layout of the torch optimizer of the same kind
    (exp_avg, exp_avg_sq, step; momentum_buffer), plus `phub_master` (fp32 weights) for a job of another dtype;
    load_state_dict() installs it on servers that do not hold the job (docs/training.md, "Checkpoints").

    CUDA parameters are staged through pinned host buffers; the copies run on a side stream and overlap the
    exchange of the parameters before them.

    Rank 0's parameters become the initial weights unless the server has some for the job (a restored
    checkpoint, or a restart that keeps them); every rank then receives the server's. `round` is the job round
    of the next step(): 0 on a new job, the round after the checkpoint's when the server restored the job from
    one, and one more after every step(). If the server restarts mid-run and restores a checkpoint, step() puts
    the restored weights into the parameters and raises phub.Resumed: the loop continues from `round`:

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

    _step_supports_amp_scaling = True  # torch.cuda.amp.GradScaler hands itself to step()

    def __init__(self, params, optimizer=None, *, client=None, init=True, check_finite=True, **kwargs):
        if optimizer is not None and optimizer not in _TORCH_CLASSES:
            raise ValueError("phub: optimizer %r is not one of %s" % (optimizer, sorted(_TORCH_CLASSES)))
        defaults, client_overrides = _optimizer_kwargs(optimizer, kwargs) if optimizer else ({}, kwargs)
        super().__init__(params, defaults)
        self.optimizer = optimizer
        self.check_finite = check_finite
        self.last_step_skipped = False
        self.client = client or Client.from_env(mode="ps", **_for_this_run(client_overrides))
        self._params = [p for group in self.param_groups for p in group["params"]]
        self._job_dtype = _JOB_DTYPES[self.client.dtype]
        self._devices = {}
        # A parameter is staged (a host buffer in the job's dtype) when it is not a CPU tensor of that dtype.
        self._stage = [p.device.type != "cpu" or p.dtype != self._job_dtype for p in self._params]
        self._weights = [self._dev(p).host_buffer(p.numel(), self._job_dtype) if s else None
                         for p, s in zip(self._params, self._stage)]
        self._grads = [self._dev(p).host_buffer(p.numel(), self._job_dtype) if s else None
                       for p, s in zip(self._params, self._stage)]
        self._zeros = {}
        self._sets = {}  # hyperparameter values -> the client's set id
        for p in self._params:
            self.client.register(p.numel())
        self.round = 0
        if init:
            self._init()
            self.round = self.client.start_round()

    def _dev(self, p):
        if p.device not in self._devices:
            self._devices[p.device] = _Device(p.device)
        return self._devices[p.device]

    def _flat(self, k):
        p = self._params[k]
        return self._weights[k] if self._stage[k] else p.data.view(-1)

    @torch.no_grad()
    def _init(self):
        self._stage_in(self._weights, [p.data for p in self._params])
        self.client.init([self._flat(k) for k in range(len(self._params))])
        self._copy_back()

    @torch.no_grad()
    def _resume(self):
        """After the server restored the job: the round to go on from, and its weights in the parameters."""
        self.round = self.client.start_round()
        for k in range(len(self._params)):
            self.client.pull(self._flat(k), k)
        self._copy_back()

    def _stage_in(self, host, tensors):
        """Device (or other-dtype) tensors into their host buffers, on the side streams; returns each one's event."""
        events = []
        for k, t in enumerate(tensors):
            if not self._stage[k]:
                events.append(_Reached())
                continue
            dev = self._dev(self._params[k])
            with dev.side():
                host[k].copy_(t.reshape(-1), non_blocking=dev.cuda)
                events.append(dev.event())
        for e in events:
            e.synchronize()
        return events

    def _copy_back(self, keys=None):
        for k in range(len(self._params)) if keys is None else keys:
            if self._stage[k]:
                dev = self._dev(self._params[k])
                with dev.side():
                    self._params[k].data.view(-1).copy_(self._weights[k], non_blocking=dev.cuda)
        for dev in self._devices.values():
            dev.settle()

    def _set_of(self, group):
        """The client's id of the hyperparameter set of `group` as it is now (0 without an optimizer)."""
        if self.optimizer is None:
            return 0
        for name, default in _UNSUPPORTED.items():
            if group.get(name, default) != default:
                raise ValueError("phub: %s=%r is not supported by phub's server optimizer" % (name, group[name]))
        if self.optimizer == "sgd":
            values = dict(optimizer="sgd", lr=group["lr"], momentum=group["momentum"], nesterov=group["nesterov"],
                          weight_decay=group["weight_decay"])
        else:
            values = dict(optimizer=self.optimizer, lr=group["lr"], betas=tuple(group["betas"]), eps=group["eps"],
                          weight_decay=group["weight_decay"])
        values = {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                  for k, v in values.items()}
        if "betas" in values:
            values["betas"] = tuple(float(b) for b in values["betas"])
        key = tuple(sorted(values.items()))
        if key not in self._sets:
            self._sets[key] = self.client.register_hparams(**values)
        return self._sets[key]

    def _found_nonfinite(self, grad_scaler, found_inf):
        if grad_scaler is not None:
            # GradScaler.step() hands itself over (torch's contract for optimizers that handle scaling): the
            # gradients are unscaled through it once per step, and what it found is what update() reads.
            from torch.cuda.amp.grad_scaler import OptState
            state = grad_scaler._per_optimizer_states[id(self)]
            if state["stage"] is OptState.READY:
                grad_scaler.unscale_(self)
            return any(v.item() != 0 for v in state["found_inf_per_device"].values())
        if found_inf is not None:
            return bool(found_inf.item() if torch.is_tensor(found_inf) else found_inf)
        if self.check_finite:
            return any(p.grad is not None and not torch.isfinite(p.grad).all() for p in self._params)
        return False

    @torch.no_grad()
    def step(self, closure=None, grad_scaler=None, found_inf=None):
        """One round: every parameter's gradient pushed with its group's hyperparameters, the updated weights
        received. `found_inf` (bool or tensor) declares non-finite gradients, as GradScaler's check would;
        `grad_scaler` is given by torch.cuda.amp.GradScaler.step(). Returns the closure's loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        nonfinite = self._found_nonfinite(grad_scaler, found_inf)
        sets = {}
        for group in self.param_groups:
            ident = self._set_of(group)
            for p in group["params"]:
                sets[id(p)] = ident
        grads = []
        for k, p in enumerate(self._params):
            g = p.grad
            if g is None:  # every rank must push every key each step
                g = self._zeros.setdefault(k, torch.zeros(p.numel(), dtype=self._job_dtype))
                grads.append((g, False))  # (a host tensor of the job's dtype already)
            else:
                grads.append((g.reshape(-1), self._stage[k]))
        # Device gradients go to their host buffers on the side streams first; each key is pushed as soon as its
        # copy is done, so the later copies overlap the exchange of the earlier keys. (The last step's copies of
        # weights out of the host buffers are done before results land there again.)
        for dev in self._devices.values():
            dev.drain()
        events = []
        for k, (g, staged) in enumerate(grads):
            if staged:
                dev = self._dev(self._params[k])
                with dev.side():
                    self._grads[k].copy_(g, non_blocking=dev.cuda)
                    events.append(dev.event())
            else:
                events.append(_Reached())
        reqs, resumed = [], None
        try:
            for k, (g, staged) in enumerate(grads):
                events[k].synchronize()
                src = self._grads[k] if staged else g.to(self._job_dtype).contiguous()
                reqs.append(self.client.step_async(self._flat(k), src, key=k, hparams=sets[id(self._params[k])],
                                                   nonfinite=nonfinite))
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
        self.last_step_skipped = any(r.skipped for r in reqs)
        self.round += 1
        return loss

    # ---- optimizer state in torch checkpoints ------------------------------------------------------------
    def _arrays(self):
        """The server's state arrays of this optimizer's kind, by torch's names."""
        job = self.optimizer
        if job is None:
            raise RuntimeError("phub: state_dict needs PSOptimizer built with its optimizer (\"sgd\", \"adam\", "
                               "\"adamw\") and values")
        return {"exp_avg": "moment1", "exp_avg_sq": "moment2"} if job in ("adam", "adamw") else \
            {"momentum_buffer": "moment1"}

    def _has_momentum(self):
        return self.optimizer != "sgd" or any(g["momentum"] != 0 for g in self.param_groups)

    @torch.no_grad()
    def state_dict(self):
        """torch's layout, read from the server between steps: per parameter its moments, 'step' (the
        optimizer's step count, as Adam keeps it) and for a job of another dtype than fp32 'phub_master'."""
        arrays = self._arrays()
        self.state.clear()
        for k, p in enumerate(self._params):
            entry = {}
            step = 0
            if self._has_momentum():
                for name, array in arrays.items():
                    buf = torch.empty(p.numel(), dtype=torch.float32)
                    step = self.client.state_pull(k, array, buf)
                    entry[name] = buf.view(p.shape)
            if self.client.dtype != "fp32":
                buf = torch.empty(p.numel(), dtype=torch.float32)
                step = self.client.state_pull(k, "master", buf)
                entry["phub_master"] = buf.view(p.shape)
            entry["step"] = torch.tensor(float(step))
            if self.optimizer == "sgd" and step == 0:
                entry["momentum_buffer"] = None  # torch's SGD before its first step
            self.state[p] = entry
        return super().state_dict()

    @torch.no_grad()
    def load_state_dict(self, state_dict):
        """The groups' hyperparameters as torch loads them; rank 0 also installs the state (moments, step count,
        master weights) and its current parameters as the weights on servers that do not hold the job (a
        server that trained it refuses: PhubError)."""
        arrays = self._arrays()
        raw = {int(i): dict(v) for i, v in state_dict["state"].items()}
        super().load_state_dict(state_dict)
        self.state.clear()  # the server holds it: nothing stays here that could go stale
        if self.client.rank != 0:
            return
        # The weights first: rank 0's parameters (the checkpoint's model); then the state, which a master of a
        # job of another dtype completes with the weights' fp32 bits.
        self._stage_in(self._weights, [p.data for p in self._params])
        self.client.init([self._flat(k) for k in range(len(self._params))])
        for k, p in enumerate(self._params):
            entry = raw.get(k, {})
            step = int(entry["step"].item()) if "step" in entry else (1 if entry.get("momentum_buffer") is not None else 0)
            for name, array in arrays.items():
                if entry.get(name) is not None:
                    self.client.state_init(k, array, entry[name].detach().to(torch.float32).reshape(-1).contiguous(), step)
            if entry.get("phub_master") is not None:
                self.client.state_init(k, "master", entry["phub_master"].to(torch.float32).reshape(-1).contiguous(), step)
        self._copy_back()


__all__ = ["HookState", "ddp_comm_hook", "PSOptimizer", "Resumed", "lua_keys", "trainable", "buffer_of"]

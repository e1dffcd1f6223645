"""phub.Client: a worker of a phub job over libphub-client, zero-copy on numpy arrays and torch tensors."""
import ctypes
import os

from . import _lib
from . import launch
from .errors import PhubError, check

_TORCH_DTYPES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}
_NUMPY_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def buffer_of(obj, writable=True):
    """(address, elements, dtype name) of a contiguous CPU numpy array or torch tensor: no copy is made."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous"):  # torch.Tensor
        if obj.device.type != "cpu":
            raise ValueError("phub: tensors must be on the CPU (got %s)" % obj.device)
        if not obj.is_contiguous():
            raise ValueError("phub: tensors must be contiguous")
        dtype = _TORCH_DTYPES.get(str(obj.dtype))
        if dtype is None:
            raise TypeError("phub: unsupported tensor dtype %s" % obj.dtype)
        return obj.data_ptr(), obj.numel(), dtype
    flags = getattr(obj, "flags", None)
    if flags is not None and hasattr(obj, "ctypes"):  # numpy.ndarray
        if not flags.c_contiguous:
            raise ValueError("phub: arrays must be C-contiguous")
        if writable and not flags.writeable:
            raise ValueError("phub: the array is read-only")
        dtype = _NUMPY_DTYPES.get(str(obj.dtype))
        if dtype is None:
            raise TypeError("phub: unsupported array dtype %s" % obj.dtype)
        return obj.ctypes.data, obj.size, dtype
    raise TypeError("phub: expected a numpy array or a torch tensor, got %s" % type(obj).__name__)


class Request:
    """An operation in flight; wait() raises PhubError if it failed. The buffers must stay alive until then."""

    def __init__(self, client, handle, keep):
        self._client, self._handle, self._keep = client, handle, keep
        self.skipped = False  # a ps step: the server skipped its round (a rank declared it non-finite)

    def done(self):
        if self._handle is None:
            return True
        flag = ctypes.c_int(0)
        check(_lib.lib.phub_test(self._client._h, self._handle, ctypes.byref(flag)))
        return bool(flag.value)

    def wait(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            flags = ctypes.c_uint32(0)
            try:
                check(_lib.lib.phub_wait_ex(self._client._h, handle, ctypes.byref(flags)))
            finally:
                self.skipped = bool(flags.value & _lib.RESULT_SKIPPED)
        return self._keep[0] if self._keep else None


def _rank_and_workers(env, overrides):
    """rank and workers for Client.from_env: from the launcher's variables (phub.launch.detect), unless both are
    among the keyword arguments."""
    if "rank" in overrides and "workers" in overrides:
        return {}
    found = launch.detect(env)
    return {"rank": found.rank, "workers": found.world_size}


def _env(env, name, default=None, cast=str):
    value = env.get(name)
    if value is None or value == "":
        if default is None:
            raise KeyError("phub: environment variable %s is not set" % name)
        return None if default == "" else default  # "" stands for an optional string
    return cast(value)


class Client:
    """One rank of a phub job. The settings must match the job in the server's config (docs/client.md)."""

    def __init__(self, servers, port_base, job, rank, workers, secret=None, lcores=1, chunk_bytes=32768, mtu=1500,
                 mode="allreduce", dtype="fp32", reduce="sum", round_modulus=0, timeout_ms=10000, window=None,
                 delay_target_us=None, bind=None, gso=True, gro=True, crc=False, restart_job=True,
                 fresh_weights=False, run_token=0, faults=None, one_address=False):
        cfg = _lib.Config()
        _lib.lib.phub_config_init(ctypes.byref(cfg))
        self._strings = [s.encode() if s else None for s in (servers, secret, bind)]
        cfg.servers, cfg.secret, cfg.bind_address = self._strings
        cfg.port_base, cfg.server_lcores, cfg.job_id = int(port_base), int(lcores), int(job)
        cfg.rank, cfg.workers = int(rank), int(workers)
        cfg.chunk_bytes, cfg.mtu, cfg.round_modulus, cfg.timeout_ms = int(chunk_bytes), int(mtu), int(round_modulus), int(timeout_ms)
        try:
            cfg.mode, cfg.dtype, cfg.reduce = _lib.MODES[mode], _lib.DTYPES[dtype], _lib.REDUCES[reduce]
        except KeyError as e:
            raise ValueError("phub: unknown mode, dtype or reduce %s" % e) from None
        if window:
            cfg.window_packets = int(window)
        if delay_target_us is not None:
            cfg.delay_target_us = int(delay_target_us)
        cfg.run_token = int(run_token) & 0xFFFFFFFF
        # Rank 0 restarts the job in a new epoch unless restart_job is False (docs/protocol.md, "Epochs").
        cfg.flags = ((0 if gso else _lib.FLAG_NO_GSO) | (0 if gro else _lib.FLAG_NO_GRO) | (_lib.FLAG_CRC if crc else 0) |
                     (0 if restart_job else _lib.FLAG_JOIN_CURRENT) | (_lib.FLAG_FRESH_WEIGHTS if fresh_weights else 0) |
                     (_lib.FLAG_ONE_ADDRESS if one_address else 0))
        for name, value in (faults or {}).items():  # e.g. {"drop_tx_ppm": 10000, "seed": 3}
            setattr(cfg, "fault_" + name, int(value))
        handle = ctypes.c_void_p()
        check(_lib.lib.phub_connect(ctypes.byref(cfg), ctypes.byref(handle)))
        self._h = handle
        self.rank, self.workers, self.mode, self.dtype, self.reduce = int(rank), int(workers), mode, dtype, reduce
        self._elems = []
        self._key_of = {}  # data address -> key, for calls without an explicit key

    @classmethod
    def from_env(cls, env=None, **overrides):
        """Settings from the environment. Rank and workers: from the launcher's variables, in phub.launch's
        order (PHUB_RANK/PHUB_WORLD_SIZE, torchrun's RANK/WORLD_SIZE, OpenMPI's OMPI_COMM_WORLD_*, Hydra's
        PMI_RANK/PMI_SIZE, srun's SLURM_PROCID/SLURM_NTASKS; docs/training.md, "Launchers"). The job: PHUB_SERVER,
        PHUB_PORT_BASE, PHUB_JOB, PHUB_SECRET, PHUB_LCORES, PHUB_MODE, PHUB_DTYPE, PHUB_REDUCE, PHUB_CHUNK_BYTES,
        PHUB_MTU, PHUB_TIMEOUT_MS, PHUB_WINDOW, PHUB_DELAY_TARGET_US, PHUB_BIND, PHUB_ROUND_MODULUS,
        PHUB_RUN_TOKEN, PHUB_ONE_ADDRESS (1: every chunk to PHUB_SERVER, whatever the job's chunk-to-interface map
        says). Keyword arguments override them (rank and workers both given: no launcher is read)."""
        env = os.environ if env is None else env
        table = [  # argument, variable, default (None: required), type
            ("servers", "PHUB_SERVER", None, str), ("port_base", "PHUB_PORT_BASE", None, int),
            ("job", "PHUB_JOB", None, int),
            ("secret", "PHUB_SECRET", "", str), ("lcores", "PHUB_LCORES", 1, int),
            ("mode", "PHUB_MODE", "allreduce", str), ("dtype", "PHUB_DTYPE", "fp32", str),
            ("reduce", "PHUB_REDUCE", "mean", str), ("chunk_bytes", "PHUB_CHUNK_BYTES", 32768, int),
            ("mtu", "PHUB_MTU", 1500, int), ("timeout_ms", "PHUB_TIMEOUT_MS", 30000, int),
            ("window", "PHUB_WINDOW", 0, int), ("delay_target_us", "PHUB_DELAY_TARGET_US", "", int),
            ("bind", "PHUB_BIND", "", str),
            ("round_modulus", "PHUB_ROUND_MODULUS", 0, int), ("run_token", "PHUB_RUN_TOKEN", 0, int),
            ("one_address", "PHUB_ONE_ADDRESS", 0, int)]
        settings = {arg: _env(env, var, default, cast) for arg, var, default, cast in table if arg not in overrides}
        settings.update(_rank_and_workers(env, overrides))
        settings.update(overrides)
        return cls(**settings)

    # -- keys ------------------------------------------------------------------------------------
    def register(self, tensor_or_elems):
        """Declares the next key (the job's keys in config order): a tensor (remembered by address) or a count."""
        key = len(self._elems)
        if isinstance(tensor_or_elems, int):
            elems = tensor_or_elems
        else:
            address, elems, dtype = buffer_of(tensor_or_elems, writable=False)
            if dtype != self.dtype:
                raise TypeError("phub: key %d is %s, the job's dtype is %s" % (key, dtype, self.dtype))
            self._key_of[address] = key
        check(_lib.lib.phub_register(self._h, key, elems, _lib.DTYPES[self.dtype]))
        self._elems.append(elems)
        return key

    @property
    def keys(self):
        return list(self._elems)

    def _resolve(self, obj, key, writable=True):
        address, elems, dtype = buffer_of(obj, writable)
        if key is None:
            key = self._key_of.get(address)
        if key is None or key == len(self._elems):
            key = self.register(obj)  # the next key of the job
        if key >= len(self._elems):
            raise KeyError("phub: key %d is not registered" % key)
        if elems != self._elems[key] or dtype != self.dtype:
            raise ValueError("phub: key %d has %d %s elements, got %d %s" % (key, self._elems[key], self.dtype, elems, dtype))
        return key, address

    # -- operations --------------------------------------------------------------------------------
    def allreduce(self, tensor, key=None):
        """In place: the sum or mean over the job's workers. Returns the tensor."""
        key, address = self._resolve(tensor, key)
        check(_lib.lib.phub_allreduce(self._h, key, address))
        return tensor

    def allreduce_async(self, tensor, key=None):
        key, address = self._resolve(tensor, key)
        handle = ctypes.c_void_p()
        check(_lib.lib.phub_allreduce_async(self._h, key, address, ctypes.byref(handle)))
        return Request(self, handle, (tensor,))

    def push(self, tensor, key=None):
        key, address = self._resolve(tensor, key, writable=False)
        check(_lib.lib.phub_push(self._h, key, address))
        return key

    def pull(self, tensor, key):
        key, address = self._resolve(tensor, key)
        check(_lib.lib.phub_pull(self._h, key, address))
        return tensor

    def init(self, params):
        """ps mode: rank 0 sends the tensors as the initial weights; then every rank receives the server's weights in
        place (rank 0's, or those the job kept: a restart that keeps them, a restored checkpoint)."""
        for key, p in enumerate(params) if isinstance(params, (list, tuple)) else [(None, params)]:
            key, address = self._resolve(p, key)
            check(_lib.lib.phub_init(self._h, key, address))
        return params

    def register_hparams(self, optimizer="sgd", lr=0.0, momentum=0.0, nesterov=False, betas=(0.0, 0.0), eps=0.0,
                         weight_decay=0.0):
        """ps mode: a hyperparameter set (one parameter group's values for a step) that steps name by the id this
        returns. `optimizer` is the torch class it is for: "sgd", "adam" or "adamw" (the job's optimizer must be
        that one). The values are checked as torch checks its optimizer's arguments."""
        h = _lib.Hparams()
        _lib.lib.phub_hparams_init(ctypes.byref(h))
        if optimizer not in _lib.OPTIMIZERS:
            raise ValueError("phub: optimizer %r is not one of %s" % (optimizer, sorted(_lib.OPTIMIZERS)))
        h.optimizer, h.nesterov = _lib.OPTIMIZERS[optimizer], int(bool(nesterov))
        h.lr, h.momentum, h.beta1, h.beta2, h.eps, h.weight_decay = (
            float(lr), float(momentum), float(betas[0]), float(betas[1]), float(eps), float(weight_decay))
        ident = ctypes.c_uint64(0)
        check(_lib.lib.phub_register_hparams(self._h, ctypes.byref(h), ctypes.byref(ident)))
        return ident.value

    def step_async(self, param, grad, key=None, hparams=0, nonfinite=False):
        """ps mode: push `grad`, receive the updated weights into `param`. `hparams`: the id of the step's
        hyperparameter set (register_hparams; 0: the job's configured optimizer); `nonfinite`: this rank found NaN
        or Inf in this step's gradients, and the server skips the round (request.skipped says so after wait)."""
        key, waddr = self._resolve(param, key)
        _, gaddr = self._resolve(grad, key, writable=False)
        handle = ctypes.c_void_p()
        flags = _lib.STEP_NONFINITE if nonfinite else 0
        check(_lib.lib.phub_step_ex(self._h, key, gaddr, waddr, int(hparams), flags, ctypes.byref(handle)))
        return Request(self, handle, (param, grad))

    def state_pull(self, key, array, out):
        """ps mode: the optimizer state `array` ("master", "moment1" or "moment2") of key `key` into `out` (fp32,
        the key's elements), as the servers hold it; returns the chunks' optimizer step count."""
        address, elems, dtype = buffer_of(out)
        self._check_state_buffer(key, elems, dtype)
        step = ctypes.c_uint64(0)
        check(_lib.lib.phub_state_pull(self._h, key, _lib.STATE_ARRAYS[array], address, ctypes.byref(step)))
        return step.value

    def state_init(self, key, array, values, step):
        """ps mode, rank 0, before init(): set the optimizer state `array` of key `key` from `values` (fp32) and the
        step count, on servers that have not trained the job."""
        address, elems, dtype = buffer_of(values, writable=False)
        self._check_state_buffer(key, elems, dtype)
        check(_lib.lib.phub_state_init(self._h, key, _lib.STATE_ARRAYS[array], address, int(step)))

    def _check_state_buffer(self, key, elems, dtype):
        if key >= len(self._elems) or elems != self._elems[key] or dtype != "fp32":
            raise ValueError("phub: optimizer state of key %d is %d fp32 elements, got %d %s"
                             % (key, self._elems[key] if key < len(self._elems) else -1, elems, dtype))

    def step(self, params, grads):
        """ps mode: pushes every gradient, receives every updated weight in place (keys in list order)."""
        reqs = [self.step_async(p, g, k) for k, (p, g) in enumerate(zip(params, grads))]
        error = None
        for r in reqs:
            try:
                r.wait()
            except PhubError as e:
                error = error or e
        if error:
            raise error
        return params

    def start_round(self):
        """The job round this client's operations start from, once joined (waits for the join): 0 when its rank 0
        restarted the job, the round after the checkpoint's when the server restored the ps job from one. After
        a phub.Resumed error: the round the job resumes at; operations are accepted again from then on."""
        r = ctypes.c_uint32(0)
        check(_lib.lib.phub_start_round(self._h, ctypes.byref(r)))
        return r.value

    def stats(self):
        s = _lib.Stats()
        check(_lib.lib.phub_get_stats(self._h, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _lib.Stats._fields_}

    def close(self):
        if getattr(self, "_h", None):
            _lib.lib.phub_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

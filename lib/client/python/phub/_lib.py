"""ctypes binding of libphub-client's C API (phub/client.h): structures, prototypes, library loading."""
import ctypes
import ctypes.util
import os

PHUB_OK = 0
STATUS_NAMES = {
    0: "ok", 1: "invalid_argument", 2: "state", 3: "system", 4: "unreachable", 5: "timeout",
    6: "round_stalled", 7: "round_mismatch", 8: "chunk_map", 9: "config_mismatch", 10: "not_initialized",
    11: "protocol", 12: "no_memory", 13: "auth", 14: "broken", 15: "epoch", 16: "drained",
    17: "resumed", 18: "hparams", 19: "nonfinite",
}
PHUB_ERR_RESUMED = 17
MODES = {"allreduce": 0, "ps": 1}
DTYPES = {"fp32": 0, "fp16": 1, "bf16": 2}
REDUCES = {"sum": 0, "mean": 1}
FLAG_NO_GSO, FLAG_NO_GRO, FLAG_CRC, FLAG_JOIN_CURRENT, FLAG_FRESH_WEIGHTS = 0x1, 0x2, 0x4, 0x8, 0x10
FLAG_ONE_ADDRESS = 0x20
OPTIMIZERS = {"sgd": 0, "adam": 1, "adamw": 2}  # PHUB_OPT_*: the torch optimizer class a hyperparameter set is for
STEP_NONFINITE, RESULT_SKIPPED = 0x1, 0x1
STATE_ARRAYS = {"master": 1, "moment1": 2, "moment2": 3}  # PHUB_STATE_*


class Config(ctypes.Structure):
    """struct phub_config, field for field."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("servers", ctypes.c_char_p),
        ("port_base", ctypes.c_uint16),
        ("server_lcores", ctypes.c_uint16),
        ("job_id", ctypes.c_uint32),
        ("rank", ctypes.c_uint16),
        ("workers", ctypes.c_uint16),
        ("secret", ctypes.c_char_p),
        ("chunk_bytes", ctypes.c_uint32),
        ("mtu", ctypes.c_uint16),
        ("mode", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("reduce", ctypes.c_int),
        ("round_modulus", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("rto_initial_us", ctypes.c_uint32),
        ("rto_min_us", ctypes.c_uint32),
        ("rto_max_us", ctypes.c_uint32),
        ("window_packets", ctypes.c_uint32),
        ("bind_address", ctypes.c_char_p),
        ("bind_port", ctypes.c_uint16),
        ("flags", ctypes.c_uint32),
        ("socket_buffer_bytes", ctypes.c_uint32),
        ("fault_drop_tx_ppm", ctypes.c_uint32),
        ("fault_drop_rx_ppm", ctypes.c_uint32),
        ("fault_dup_tx_ppm", ctypes.c_uint32),
        ("fault_reorder_tx_ppm", ctypes.c_uint32),
        ("fault_seed", ctypes.c_uint64),
        ("delay_target_us", ctypes.c_uint32),
        ("run_token", ctypes.c_uint32),
    ]


class Stats(ctypes.Structure):
    """struct phub_stats, field for field."""
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "packets_sent", "packets_received", "payload_bytes_sent", "payload_bytes_received", "retransmits",
        "rerequests", "duplicates", "stale", "bad_tag", "malformed", "errors_received", "stalls_reported",
        "timeouts", "fast_retransmits", "ops_completed", "send_batches", "recv_batches", "gro_coalesced")] + [
        ("window_packets", ctypes.c_uint32), ("srtt_us", ctypes.c_uint32), ("rto_us", ctypes.c_uint32),
        ("gso", ctypes.c_uint8), ("gro", ctypes.c_uint8), ("reorder_window_us", ctypes.c_uint32),
        ("needless_resends", ctypes.c_uint64), ("epoch", ctypes.c_uint32), ("resumes", ctypes.c_uint32),
        ("rejoins", ctypes.c_uint32), ("replayed", ctypes.c_uint64), ("bad_mac", ctypes.c_uint64),
        ("sessions", ctypes.c_uint32), ("bad_checksum", ctypes.c_uint64),
        ("interface_moves", ctypes.c_uint32)]


class Hparams(ctypes.Structure):
    """struct phub_hparams, field for field."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("optimizer", ctypes.c_uint32), ("nesterov", ctypes.c_uint32)] + [
        (name, ctypes.c_double) for name in ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay")]


def _candidates():
    env = os.environ.get("PHUB_CLIENT_LIB")
    if env:
        yield env
    try:
        from . import _libpath  # written by meson: the library of this build or install
        yield _libpath.LIBRARY
    except ImportError:
        pass
    found = ctypes.util.find_library("phub-client")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("phub: cannot load libphub-client (set PHUB_CLIENT_LIB to its path): " + "; ".join(errors or ["not found"]))


lib = _load()
_P = ctypes.c_void_p
_prototypes = {
    "phub_config_init": (None, [ctypes.POINTER(Config)]),
    "phub_last_error": (ctypes.c_char_p, []),
    "phub_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "phub_connect": (ctypes.c_int, [ctypes.POINTER(Config), ctypes.POINTER(_P)]),
    "phub_close": (ctypes.c_int, [_P]),
    "phub_register": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int]),
    "phub_finalize": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_uint32)]),
    "phub_allreduce": (ctypes.c_int, [_P, ctypes.c_uint32, _P]),
    "phub_allreduce_async": (ctypes.c_int, [_P, ctypes.c_uint32, _P, ctypes.POINTER(_P)]),
    "phub_push": (ctypes.c_int, [_P, ctypes.c_uint32, _P]),
    "phub_pull": (ctypes.c_int, [_P, ctypes.c_uint32, _P]),
    "phub_init": (ctypes.c_int, [_P, ctypes.c_uint32, _P]),
    "phub_step": (ctypes.c_int, [_P, ctypes.c_uint32, _P, _P]),
    "phub_step_async": (ctypes.c_int, [_P, ctypes.c_uint32, _P, _P, ctypes.POINTER(_P)]),
    "phub_wait": (ctypes.c_int, [_P, _P]),
    "phub_test": (ctypes.c_int, [_P, _P, ctypes.POINTER(ctypes.c_int)]),
    "phub_get_stats": (ctypes.c_int, [_P, ctypes.POINTER(Stats)]),
    "phub_start_round": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_uint32)]),
    "phub_hparams_init": (None, [ctypes.POINTER(Hparams)]),
    "phub_register_hparams": (ctypes.c_int, [_P, ctypes.POINTER(Hparams), ctypes.POINTER(ctypes.c_uint64)]),
    "phub_step_ex": (ctypes.c_int, [_P, ctypes.c_uint32, _P, _P, ctypes.c_uint64, ctypes.c_uint32, ctypes.POINTER(_P)]),
    "phub_wait_ex": (ctypes.c_int, [_P, _P, ctypes.POINTER(ctypes.c_uint32)]),
    "phub_state_pull": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_int, _P, ctypes.POINTER(ctypes.c_uint64)]),
    "phub_state_init": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_int, _P, ctypes.c_uint64]),
}
for _name, (_res, _args) in _prototypes.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args

_probe = Config()
lib.phub_config_init(ctypes.byref(_probe))
if _probe.struct_size != ctypes.sizeof(Config):
    raise ImportError("phub: libphub-client's phub_config has %d bytes, this binding %d: versions differ"
                      % (_probe.struct_size, ctypes.sizeof(Config)))

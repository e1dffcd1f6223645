"""The exception raised for every failing libphub-client call."""
from . import _lib


class PhubError(RuntimeError):
    """A phub_status code (e.g. 'unreachable', 'round_stalled') and the library's message."""

    def __init__(self, code, message):
        self.code = code
        self.name = _lib.STATUS_NAMES.get(code, "unknown")
        super().__init__("phub %s: %s" % (self.name, message))


class Resumed(PhubError):
    """ps: the server restarted and restored the job from a checkpoint, so the operation is void. The job goes on
    from `round` (set by phub.torch.PSOptimizer.step, which has already put the restored weights into the
    parameters; with a plain Client: round = client.start_round(), then pull every key)."""

    def __init__(self, code, message):
        super().__init__(code, message)
        self.round = None


def check(status):
    if status != _lib.PHUB_OK:
        cls = Resumed if status == _lib.PHUB_ERR_RESUMED else PhubError
        raise cls(status, (_lib.lib.phub_last_error() or b"").decode(errors="replace"))
    return status

"""The exception raised for every failing libphub-client call."""
from . import _lib


class PhubError(RuntimeError):
    """A phub_status code (e.g. 'unreachable', 'round_stalled') and the library's message."""

    def __init__(self, code, message):
        self.code = code
        self.name = _lib.STATUS_NAMES.get(code, "unknown")
        super().__init__("phub %s: %s" % (self.name, message))


def check(status):
    if status != _lib.PHUB_OK:
        raise PhubError(status, (_lib.lib.phub_last_error() or b"").decode(errors="replace"))
    return status

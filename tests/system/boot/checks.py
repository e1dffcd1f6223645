"""Named checks for the boot tests: each prints ok/FAIL, and the summary line tools/test/summarize.py counts."""
import signal


def _interrupt(*_):
    raise KeyboardInterrupt


def unwind_on_sigterm():
    """meson's timeout sends SIGTERM: unwind through the tests' finally blocks, which stop servers and clean up."""
    signal.signal(signal.SIGTERM, _interrupt)


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def __call__(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok: {name}", flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL: {name}" + (f"\n  {detail}" if detail else ""), flush=True)
        return ok

    def summary(self):
        """Prints `SUBTESTS passed=N failed=M`; the exit status: 0 only if something ran and nothing failed."""
        print(f"SUBTESTS passed={self.passed} failed={len(self.failed)}", flush=True)
        return 0 if self.passed and not self.failed else 1

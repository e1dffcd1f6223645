"""What the fault-matrix tests share (issue 17): the `FAULT` line (Matrix), its figures from the workers'
summaries, and the recovery measurement from a server's own `phub-ctl stats --json` samples (Sampler).
tests/system/faults (faults_test.py, soak.py) and tests/system/hier (a rack hub killed) use it."""
import json
import threading

import livenet


class Matrix:
    """The FAULT lines; `records` keeps each line's figures (fault, rounds, wrong, errors, recovery) for the soak,
    which makes its own with quiet=True and prints totals instead."""

    def __init__(self, check, quiet=False):
        self.check = check
        self.quiet = quiet
        self.lines = []
        self.records = []

    def line(self, fault, rounds, wrong, errors, recovery, note=""):
        rec = "-" if recovery is None else "%.2f s" % recovery
        text = "FAULT %-16s rounds %5d  wrong %d  errors %d  recovery %s%s" % (fault, rounds, wrong, errors, rec,
                                                                            ("  (%s)" % note) if note else "")
        self.lines.append(text)
        self.records.append((fault, rounds, wrong, errors, recovery))
        if not self.quiet:
            print(text, flush=True)


# The figures of a FAULT line from phub-demo-worker ranks' [(exit status, summary fields, stderr)].
def rounds_of(results):
    return max((int(s.get("rounds", 0)) for _, s, _ in results), default=0)


def wrong_of(results):
    return sum(int(s.get("mismatches", 0)) for _, s, _ in results)


def errors_of(results):
    return [(s.get("status"), err[-160:]) for rc, s, err in results if rc != 0 or s.get("status") != "OK"]


def pools_in_use(stats):
    """{pool name: mbufs out of the pool} from a `stats --json` sample."""
    return {p["name"]: p["in_use"] for p in stats.get("pools", [])}


class Sampler:
    """phub-ctl stats --json every ~interval_ms in a thread, on the server's control socket (or `socket`): [(when
    the server took the sample, {job: (rounds_completed, epoch)})]. The server's own sample time, not ours: a
    sample may be up to its control.metrics_interval_ms old."""

    def __init__(self, net, interval_ms, socket=None):
        self.ctl = livenet.Ctl(net, socket=socket)
        self.interval_ms = interval_ms
        self.samples = []
        self.mbufs_in_use_high = 0  # the most mbufs out of the server's pools in any sample
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            try:
                rc, out, _ = self.ctl("stats", "--json", timeout_s=8)
                if rc == 0:
                    s = json.loads(out)
                    self.mbufs_in_use_high = max(self.mbufs_in_use_high, sum(pools_in_use(s).values()))
                    self.samples.append((s["taken_unix_ms"] / 1000, {j["name"]: (j["rounds_completed"], j["epoch"])
                                                                          for j in s["jobs"]}))
            except Exception:  # the server may be down (a restart)
                pass
            self.stop_flag.wait(self.interval_ms / 1000)

    def stop(self):
        self.stop_flag.set()
        self.thread.join(timeout=15)

    def recovery(self, job, t_end, new_epoch=False, new_server=False):
        """Seconds from t_end to the first sample showing a round of `job` completed after t_end; with new_epoch,
        a round of an epoch started after t_end (the rounds of the old epoch that were still completing when a
        worker was killed do not count); with new_server, a round counted by a server started at t_end (its
        counters start at 0)."""
        base, epoch0 = (0, None) if new_server else (None, None)
        for t, jobs in self.samples:
            rounds, epoch = jobs.get(job, (0, 0))
            if new_server:
                if t > t_end and rounds > 0:
                    return t - t_end
                continue
            if t <= t_end or base is None:
                base, epoch0 = rounds, epoch
                continue
            if new_epoch and epoch == epoch0:
                base = rounds
                continue
            if rounds != base:  # a server restart sets the counter back: any change is progress
                return t - t_end
        return None

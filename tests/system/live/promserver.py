"""Debian's prometheus in a test's network namespace, scraping one phub-server's metrics endpoint there, its TSDB in
the test's temporary directory; and its HTTP API (instant queries, label values) asked from inside the namespace.
Used by the live counters test and the Grafana dashboard test."""
import json
import os
import subprocess
import time
import urllib.parse


def in_netns(ns, argv, timeout_s=20, stdin=None):
    """(exit status, stdout, stderr) of argv run in namespace ns."""
    r = subprocess.run(["ip", "netns", "exec", ns] + argv, input=stdin, capture_output=True, text=True,
                       timeout=timeout_s)
    return r.returncode, r.stdout, r.stderr


def http_get(ns, url):
    """GET inside namespace ns (where phub's endpoint and Prometheus listen on 127.0.0.1)."""
    code = ("import sys, urllib.request\n"
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n")
    rc, out, err = in_netns(ns, ["/usr/bin/python3", "-c", code, url])
    if rc != 0:
        raise RuntimeError("GET %s: %s" % (url, err.strip()[-300:]))
    return out


def free_port(ns):
    """A TCP port free on 127.0.0.1 in namespace ns."""
    code = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
    return int(in_netns(ns, ["/usr/bin/python3", "-c", code])[1])


class Prometheus:
    """Started at construction; `procs` is the list of processes its owner stops (phubnet.Net.procs); a `timeout`
    bounds it anyway. It scrapes 127.0.0.1:target_port every scrape_ms under the job name "phub"."""

    def __init__(self, ns, tmp, procs, target_port, scrape_ms, timeout_s=180):
        self.ns = ns
        self.url = "http://127.0.0.1:%d" % free_port(ns)
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: %dms\n  scrape_timeout: %dms\n"
                    "scrape_configs:\n  - job_name: phub\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
                    % (scrape_ms, scrape_ms - 50, target_port))
        self.log = os.path.join(tmp, "prometheus.log")
        argv = ["ip", "netns", "exec", ns, "timeout", str(timeout_s), "prometheus", "--config.file=" + cfg,
                "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                "--web.listen-address=" + self.url[len("http://"):], "--log.level=warn"]
        with open(self.log, "w") as log:
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))

    def _get(self, path, params):
        body = json.loads(http_get(self.ns, self.url + path + "?" + urllib.parse.urlencode(params)))
        if body.get("status") != "success":
            raise RuntimeError("prometheus: %s %s: %s" % (path, params, body))
        return body["data"]

    def api(self, expr, at=None):
        """The result of an instant query (at a Unix time, default now)."""
        query = {"query": expr} if at is None else {"query": expr, "time": "%.3f" % at}
        return self._get("/api/v1/query", query)["result"]

    def label_values(self, label, match):
        """The values of `label` on the series that `match` selects."""
        return self._get("/api/v1/label/%s/values" % label, {"match[]": match})

    def wait_scraping(self, timeout_s=60):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                if [r["value"][1] for r in self.api('up{job="phub"}')] == ["1"]:
                    return
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus scraped nothing in %d s: %s" % (timeout_s, open(self.log).read()[-1000:]))

"""Two racks of the testbed (tools/testbed), a phub-server (af_packet) on each rack's hub serving one hierarchical
job, one host per rack for its worker rank: the live bed that the Wireshark and Grafana tests observe. The hub
configs are hier_test's; the workers are phub-demo-worker ranks pointed at their own rack's hub."""
import os
import signal
import time

import hier_test
from hierbed import livenet, testbed
from livenet import phubnet

RACKS = (1, 2)


class TwoRacks:
    """Use as a context manager: everything (namespaces, processes, files) goes at the end, also on failure.
    `job`: a phubnet.job table whose workers is 2; `settings`: overrides of the hub configs (phubnet's)."""

    def __init__(self, build, job, settings=None, tag="w"):
        self.build, self.job, self.settings = build, job, settings
        self.ranks = hier_test.ranks_of(len(RACKS), 1)
        self.tb = testbed.Testbed(racks=len(RACKS), hosts_per_rack=1, hubs_per_rack=1, host_offloads=False,
                                  prefix="%s%s%d" % (testbed.FAMILY, tag, os.getpid()))
        self.net = self.hubs = None
        self.servers, self.paths, self.logs = {}, {}, {}

    def __enter__(self):
        self.tb.__enter__()
        try:
            self.hubs = {r: self.tb.release_hub_address(r) for r in RACKS}
            self.net = phubnet.Net(2, build_dir=self.build, lcores=1, prefix=self.tb.prefix)  # configs, servers
            for r in RACKS:
                self.paths[r] = livenet.write(os.path.join(self.net.tmp, "hub%d.lua" % r),
                                              hier_test.hub_config(self.net, r, self.job, self.ranks, self.settings))
                self.logs[r] = os.path.join(self.net.tmp, "hub%d.log" % r)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.net is not None:
                self.net.down()
        finally:
            self.tb.__exit__(*exc)

    @property
    def tmp(self):
        return self.net.tmp

    def start_hubs(self, timeout_s=150):
        for r in RACKS:
            self.servers[r] = self.net.launch_server(self.hubs[r]["ns"], self.paths[r], self.logs[r], timeout_s)

    def start_workers(self, rounds, timeout_s=90):
        """One phub-demo-worker rank per rack, `rounds` rounds each; not waited for (livenet.finish_workers)."""
        demo = os.path.join(self.build, "tools", "phub-demo", "phub-demo-worker")
        return hier_test.start_workers(self.tb, demo, self.paths, self.hubs, self.ranks, rounds, timeout_s)

    def stop_hub(self, r):
        """SIGINT to hub r's phub-server; its exit status (it prints its final counters in its log)."""
        self.net.signal_server(signal.SIGINT, self.hubs[r]["ns"])
        return self.servers.pop(r).wait(timeout=30)

    def counters(self, r):
        """Hub r's final counters (after stop_hub), as phubnet.parse_counters reads them."""
        return phubnet.parse_counters(open(self.logs[r]).read())

    def metrics_port(self, r, timeout_s=10):
        """The TCP port of hub r's Prometheus endpoint (control.metrics_address 127.0.0.1:0, in its namespace)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for line in open(self.logs[r]).read().splitlines():
                if line.startswith("phub: metrics: http://127.0.0.1:"):
                    return int(line.rsplit(":", 1)[1].split("/")[0])
            time.sleep(0.1)
        raise RuntimeError("hub %d logged no metrics endpoint" % r)

    def leaks(self):
        return self.tb.leaks()

#!/usr/bin/python3
"""The Grafana dashboard tools/grafana/phub.json: (1) it type-checks against Grafana's published schema (npm
@grafana/schema, schema_check.py), and three broken copies of it do not (so the check can fail); (2) its layout and
queries are sound (unique ids, panels inside the 24-column grid and apart, each query on the datasource variable)
and it covers goodput, rounds, drops, retransmits, hub peers, sessions and memory; (3) against a real Prometheus
(Debian's) scraping a live phub-server every 200 ms while a hierarchical ps job with sessions runs across two racks
of the testbed (tests/system/hier/tworacks.py), the variables' queries list the server and the job, and every
panel's every query, evaluated through /api/v1/query, returns data. Grafana's variables are put in as Grafana would:
$instance and $job_name as their All value (.*), $__rate_interval as RATE_INTERVAL. Root; bounded; everything
removed on failure. Usage: dashboard_test.py --build BUILD_DIR."""
import copy
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "hier"))
sys.path.insert(0, os.path.join(HERE, "..", "live"))
import hierbed  # noqa: E402
import promserver  # noqa: E402
import schema_check  # noqa: E402
import tworacks  # noqa: E402
from hierbed import livenet  # noqa: E402
from livenet import phubnet  # noqa: E402

DASHBOARD = os.path.join(ROOT, "tools", "grafana", "phub.json")
SCRAPE_MS = 200
RATE_INTERVAL = "5s"  # what Grafana's $__rate_interval is at most here: 4 scrape intervals, or one plus the step
ROUNDS = 1500         # enough for the queries to run while the job does (about 20 s on this box)
KEYS = [6000, 700]
ADAM = dict(kind="adam", lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8)
# What the dashboard must show (the list), each by the metric families that say it.
TOPICS = {
    "goodput": ["phub_job_push_payload_bytes_total"],
    "rounds": ["phub_job_rounds_completed_total", "phub_job_round_latency_seconds_bucket"],
    "drops by reason": ["phub_drops_total", "phub_malformed_total"],
    "retransmits": ["phub_job_retransmits_seen_total", "phub_job_partials_retransmitted_total"],
    "hub peers": ["phub_hub_partials_sent_total", "phub_hub_srtt_us", "phub_hub_unreachable"],
    "sessions": ["phub_job_sessions_established_total", "phub_job_joins_total"],
    "memory": ["phub_mempool_in_use", "phub_mempool_avail"],
}


def queries(dashboard):
    """[(panel title, refId, expr)] of every panel's every target."""
    return [(p.get("title"), t.get("refId"), t.get("expr")) for p in dashboard["panels"] if p.get("type") != "row"
            for t in p.get("targets", [])]


def variable_queries(dashboard):
    """{name: PromQL of label_values(selector, label)} of the query variables."""
    out = {}
    for v in dashboard["templating"]["list"]:
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out[v["name"]] = q
    return out


def grafana_expand(expr):
    """A panel query with Grafana's variables put in: every server and every job (their All value), the rate window."""
    return expr.replace("$instance", ".*").replace("$job_name", ".*").replace("$__rate_interval", RATE_INTERVAL)


def schema(check, dashboard):
    why = schema_check.installed()
    if not check("Grafana's schema and TypeScript are installed", why is None, why or ""):
        return
    ok, out, typed = schema_check.check(dashboard)
    check("the dashboard type-checks against @grafana/schema %s (Dashboard; options and field config of %d "
          "timeseries/stat panels)" % (schema_check.schema_version(), typed), ok and typed > 0, out[-3000:])
    broken = copy.deepcopy(dashboard)
    broken["panels"][1]["gridPoss"] = broken["panels"][1].pop("gridPos")
    unknown_key = broken
    wrong_type = dict(copy.deepcopy(dashboard), schemaVersion="39")
    bad_enum = copy.deepcopy(dashboard)
    next(p for p in bad_enum["panels"] if p["type"] == "stat")["options"]["textMode"] = "loud"
    for what, d in (("an unknown panel key", unknown_key), ("schemaVersion as a string", wrong_type),
                    ("a stat textMode Grafana does not have", bad_enum)):
        ok, out, _ = schema_check.check(d)
        check("a copy with %s fails the schema check" % what, not ok and "error TS" in out, out[-500:])


def structure(check, dashboard):
    panels = dashboard["panels"]
    ids = [p.get("id") for p in panels]
    check("%d panels, unique ids" % len(panels), len(ids) == len(set(ids)) and None not in ids, str(ids))
    boxes = [(p["gridPos"]["x"], p["gridPos"]["y"], p["gridPos"]["w"], p["gridPos"]["h"]) for p in panels]
    inside = all(x >= 0 and w > 0 and x + w <= 24 for x, _, w, _ in boxes)
    overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                if a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]]
    check("panels inside the 24-column grid and apart", inside and not overlaps, "overlaps %s" % overlaps[:3])
    qs = queries(dashboard)
    data_panels = [p for p in panels if p.get("type") != "row"]
    check("every panel has a query on the datasource variable, each with its refId",
          all(p.get("targets") and p.get("datasource", {}).get("uid") == "${datasource}" and
              all(t.get("refId") and t.get("expr") and t.get("datasource", {}).get("uid") == "${datasource}"
                  for t in p["targets"]) for p in data_panels))
    text = " ".join(e for _, _, e in qs)
    missing = {topic: [m for m in metrics if m not in text] for topic, metrics in TOPICS.items()}
    check("the dashboard covers %s" % ", ".join(TOPICS), not any(missing.values()), str(missing))


def live(check, build, dashboard):
    job = phubnet.job(1, "H", 2, KEYS, 42100, mode="ps", optimizer=ADAM, secret="grafana-dashboard-test-secret",
                      allowed_sources=["198.18.%d.0/24" % r for r in tworacks.RACKS])
    settings = dict(control=dict(metrics_interval_ms=SCRAPE_MS))
    with tworacks.TwoRacks(build, job, settings, tag="g") as bed:
        bed.start_hubs()
        ns = bed.hubs[1]["ns"]
        prom = promserver.Prometheus(ns, bed.tmp, bed.net.procs, bed.metrics_port(1), SCRAPE_MS)
        prom.wait_scraping()
        workers = bed.start_workers(ROUNDS, timeout_s=120)
        deadline = time.time() + 30  # the job's rounds under way, as Prometheus sees them
        while time.time() < deadline and not prom.api('rate(phub_job_rounds_completed_total[%s]) > 0' % RATE_INTERVAL):
            time.sleep(0.2)
        time.sleep(2.0)  # a few more scrapes of the running job
        results = evaluate(check, prom, dashboard)
        running = all(p.poll() is None for p in workers)
        ok, detail = livenet.workers_ok(livenet.finish_workers(workers, 120))
        check("the queries were evaluated while the job ran (both ranks still running)", running)
        check("both ranks complete %d rounds, every result right" % ROUNDS, ok, detail)
        for r in (2, 1):
            check("hub %d stops on SIGINT with exit 0" % r, bed.stop_hub(r) == 0)
        if check.failed:
            for r, path in bed.logs.items():
                print("hub %d log tail:\n%s" % (r, open(path).read()[-1500:]), flush=True)
            print("prometheus log:\n%s" % open(prom.log).read()[-1500:], flush=True)
    leaks = bed.leaks()
    check("nothing left (namespaces, processes, root nftables tables): %s" % leaks, not any(leaks.values()))
    return results


def evaluate(check, prom, dashboard):
    for name, q in variable_queries(dashboard).items():
        # label_values(SELECTOR, LABEL) is Grafana's; Prometheus answers it as the label's values on SELECTOR.
        selector, label = q[len("label_values("):-1].rsplit(",", 1)
        values = prom.label_values(label.strip(), grafana_expand(selector.strip()))
        want = "H" if label.strip() == "job_name" else None
        check("variable $%s (%s) lists %s" % (name, q, values), values and (want is None or want in values))
    empty = []
    for title, ref, expr in queries(dashboard):
        result = prom.api(grafana_expand(expr))
        print("PANEL %-34s %s  %2d series  %s" % (title, ref, len(result), expr), flush=True)
        if not result:
            empty.append("%s/%s: %s" % (title, ref, expr))
    check("every query of every panel returns data from Prometheus (%d queries)" % len(queries(dashboard)),
          not empty, "no data: " + "; ".join(empty))
    return empty


def main():
    build, check, ready = hierbed.begin()
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    schema(check, dashboard)
    structure(check, dashboard)
    if ready:
        live(check, build, dashboard)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

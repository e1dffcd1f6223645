#!/usr/bin/python3
"""The measured figures that the README, docs/bench/ranges.md and docs/pktgen.md quote from the benchmark JSON
files committed in docs/bench agree with those files, and docs/bench/report.md is what
tools/bench/lib/phubbench/report_md.py makes of them. Each figure is found in its sentence by a pattern and
compared with the JSON value printed the way the docs print it; a sentence that no longer matches fails too,
so a rerun that rewrites the JSON and not the prose (or the other way round) is caught.

Usage: figures_test.py --source ROOT"""
import argparse
import json
import os
import re
import sys
import tempfile

from meson_info import Checks


def read(root, *path):
    with open(os.path.join(root, *path), encoding="utf-8") as f:
        return f.read()


def ratios(data):
    """metric -> ratio of a benchmark JSON's RESULT lines."""
    return {r["metric"]: r["ratio"] for r in data["results"]}


def readme_row(readme, command):
    """The 'measured' cells of the README's results table whose command cell is `command`, in order."""
    rows = []
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] == "`%s`" % command:
            rows.append(cells[2])
    return rows


def find(t, name, text, pattern):
    """The groups of `pattern` in `text`, or None (a failed check) when the sentence is not there."""
    m = re.search(pattern, text)
    t.check("%s: the sentence is there (/%s/)" % (name, pattern), m is not None)
    return m.groups() if m else None


def readme_figure(t, readme, command, name, pattern, ratio):
    """The groups of `pattern` in the README's one row for `command`, whose first is `ratio` as the README prints
    it (three decimals); None (a failed check) when the row or its sentence is not there."""
    rows = readme_row(readme, command)
    t.equal("README: one row for %s" % command, len(rows), 1)
    g = find(t, name, rows[0], pattern) if rows else None
    if g:
        t.equal("%s: the figure is the JSON's ratio" % name, g[0], three(ratio))
    return g


def two(x):
    return "%.2f" % x


def three(x):
    return "%.3f" % x


def among(t, name, quoted, pairs):
    """Each quoted pair ratio (two decimals) is one of the JSON's per-pair ratios."""
    printed = [two(p) for p in pairs]
    for q in quoted:
        t.check("%s: pair ratio %s is one of the JSON's pairs %s" % (name, q, printed), q in printed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    root = a.source
    t = Checks("the docs' measured figures against docs/bench/*.json")
    server = json.loads(read(root, "docs", "bench", "server.json"))
    pktgen = json.loads(read(root, "docs", "bench", "pktgen.json"))
    readme = read(root, "README.md")
    ranges = read(root, "docs", "bench", "ranges.md")
    pktgen_md = read(root, "docs", "pktgen.md")
    s_ratio = ratios(server)["goodput_per_lcore_1500"]
    p = ratios(pktgen)
    tx_pairs = pktgen["tx_ceiling"]["pair_ratios"]

    # The README's results table.
    g = readme_figure(t, readme, "tools/bench/server", "README server row",
                      r"^(\d\.\d+) \(pairs (\d\.\d+)-(\d\.\d+) in the fast memory state", s_ratio)
    if g:
        among(t, "README server row", g[1:], server["pair_ratios"])
    rows = readme_row(readme, "tools/bench/pktgen")
    t.equal("README: two rows for tools/bench/pktgen", len(rows), 2)
    scaling = [c for c in rows if c.startswith("MTU 1500")]
    tx = [c for c in rows if not c.startswith("MTU 1500")]
    for cell in scaling[:1]:
        g = find(t, "README scaling row", cell, r"^MTU 1500 (\d\.\d+), MTU 9000 (\d\.\d+); per point (\d\.\d+) "
                 r"\((\d+) workers\) to (\d\.\d+) \((\d+) workers\)")
        if g:
            t.equal("README: MTU 1500 is pktgen.json's", g[0], three(p["server_goodput_per_lcore_1500"]))
            t.equal("README: MTU 9000 is pktgen.json's", g[1], three(p["server_goodput_per_lcore_9000"]))
            workers = {int(m.group(1)): r for k, r in p.items()
                       for m in [re.fullmatch(r"server_goodput_per_lcore_(\d+)workers", k)] if m}
            t.check("pktgen.json has scaling points over workers", len(workers) >= 2, repr(sorted(workers)))
            if workers:
                low = min(workers, key=workers.get)
                high = max(workers, key=workers.get)
                t.equal("README: the lowest point over workers", (g[2], int(g[3])), (two(workers[low]), low))
                t.equal("README: the highest point over workers", (g[4], int(g[5])), (two(workers[high]), high))
    for cell in tx[:1]:
        g = find(t, "README TX ceiling row", cell, r"^(\d\.\d+) \(pairs (\d\.\d+)-(\d\.\d+);")
        if g:
            t.equal("README: the TX ceiling is pktgen.json's", g[0], three(p["generator_tx_ceiling"]))
            among(t, "README TX ceiling row", g[1:], tx_pairs)

    # tools/bench/server --ports 2's row: the ratio of docs/bench/server-2ports.json and two of its pairs.
    ports2 = json.loads(read(root, "docs", "bench", "server-2ports.json"))
    p2_ratio = ratios(ports2)["goodput_2ports"]
    g = readme_figure(t, readme, "tools/bench/server --ports 2", "README 2-port row",
                      r"^(\d\.\d+) \((\d+) pairs (\d\.\d+)-(\d\.\d+)", p2_ratio)
    if g:
        t.equal("README 2-port row: the pairs are server-2ports.json's", int(g[1]), len(ports2["pair_ratios"]))
        t.equal("README 2-port row: the range is the lowest and highest pair", g[2:],
                (two(min(ports2["pair_ratios"])), two(max(ports2["pair_ratios"]))))

    # tools/bench/train's rows: the ratios of docs/bench/train.json's RESULT lines.
    train = json.loads(read(root, "docs", "bench", "train.json"))
    tr = {m.group(1): m.group(2) for m in (re.match(r"RESULT train (\S+)=\S+ limit=\S+ ratio=(\S+)", line)
                                           for line in train["results"]) if m}
    rows = readme_row(readme, "tools/bench/train")
    t.equal("README: two rows for tools/bench/train", len(rows), 2)
    checks = [("flat", r"^(\d\.\d+) / (\d\.\d+) \(time to loss (\d\.\d+) / (\d\.\d+);",
               ["step_time_vs_gloo_planned_flat_phub_ps", "step_time_vs_gloo_planned_flat_phub_ar",
                "time_to_loss_vs_gloo_planned_flat_phub_ps", "time_to_loss_vs_gloo_planned_flat_phub_ar"]),
              ("racks", r"^(\d\.\d+) / (\d\.\d+) vs shuffled .*; (\d\.\d+) / (\d\.\d+) vs planned",
               ["step_time_vs_gloo_shuffled_racks_hier_ps", "step_time_vs_gloo_shuffled_racks_hier_ar",
                "step_time_vs_gloo_planned_racks_hier_ps", "step_time_vs_gloo_planned_racks_hier_ar"])]
    for cell, (shape, pattern, metrics) in zip(rows, checks):
        g = find(t, "README train %s row" % shape, cell, pattern)
        if g:
            t.equal("README: the %s row is train.json's" % shape, list(g), [tr.get(k) for k in metrics])

    # docs/bench/ranges.md: the runs behind the README's lines.
    g = find(t, "ranges.md server", ranges,
             r"\n(\d\.\d+) in docs/bench \((\d+\.\d) vs (\d+\.\d) Gbit/s; median of (\d+) alternating pairs")
    if g:
        r = server["results"][0]
        t.equal("ranges.md: the server figure, its value and limit", g[:3],
                (three(s_ratio), "%.1f" % r["value"], "%.1f" % r["limit"]))
        t.equal("ranges.md: the server pairs are server.json's repetitions", int(g[3]), len(server["pair_ratios"]))
    g = find(t, "ranges.md 2 ports", ranges, r"\n(\d\.\d+) in docs/bench/server-2ports\.json \((\d+\.\d) vs "
             r"(\d+\.\d) Gbit/s; median of (\d+) alternating pairs")
    if g:
        r = ports2["results"][0]
        t.equal("ranges.md: the 2-port figure, its value and limit", g[:3],
                (three(p2_ratio), "%.1f" % r["value"], "%.1f" % r["limit"]))
        t.equal("ranges.md: the 2-port pairs are server-2ports.json's repetitions", int(g[3]),
                len(ports2["pair_ratios"]))
    g = find(t, "ranges.md MTU", ranges, r"MTU 1500: (\d\.\d+) \(pairs [^)]*\); MTU 9000: (\d\.\d+)")
    if g:
        t.equal("ranges.md: MTU 1500 and 9000 are pktgen.json's", g,
                (three(p["server_goodput_per_lcore_1500"]), three(p["server_goodput_per_lcore_9000"])))
    g = find(t, "ranges.md scaling points", ranges, r"one pair per point: (\d\.\d+) at 2 workers, (\d\.\d+) at 4, "
             r"(\d\.\d+) at 8, (\d\.\d+) at 16, (\d\.\d+) at 32; chunk 8k/32k (\d\.\d+)/(\d\.\d+); bf16 (\d\.\d+); "
             r"2 server lcores (\d\.\d+) per lcore")
    if g:
        want = tuple(two(p["server_goodput_per_lcore_" + k]) for k in
                     ("2workers", "4workers", "8workers", "16workers", "32workers", "chunk8k", "chunk32k", "bf16",
                      "2lcores"))
        t.equal("ranges.md: every scaling point is pktgen.json's", g, want)
    g = find(t, "ranges.md outliers", ranges, r"chunk 128k (\d\.\d+), fp32 (\d\.\d+)")
    if g:
        t.equal("ranges.md: the two split pairs are pktgen.json's", g,
                (two(p["server_goodput_per_lcore_chunk128k"]), two(p["server_goodput_per_lcore_fp32"])))
    g = find(t, "ranges.md TX ceiling", ranges, r"\n(\d\.\d+) in docs/bench \(pairs (\d\.\d+)-(\d\.\d+)(?:, plus two "
             r"pairs split by a state switch, (\d\.\d+) and (\d\.\d+))?\)")
    if g:
        t.equal("ranges.md: the TX ceiling is pktgen.json's", g[0], three(p["generator_tx_ceiling"]))
        among(t, "ranges.md TX ceiling", [q for q in g[1:] if q is not None], tx_pairs)
    g = find(t, "docs/pktgen.md TX ceiling", pktgen_md, r"With recycled frames: (\d\.\d+) in the latest full run")
    if g:
        t.equal("docs/pktgen.md: the TX ceiling is pktgen.json's", g[0], three(p["generator_tx_ceiling"]))

    # docs/bench/report.md is generated from the JSON files: made again, it is the same but for its date line.
    sys.path.insert(0, os.path.join(root, "tools", "bench", "lib"))
    from phubbench import report_md
    with tempfile.TemporaryDirectory(prefix="phub-figures-") as d:
        for name in ("server.json", "server-2ports.json", "pktgen.json"):
            with open(os.path.join(d, name), "w") as f:
                f.write(read(root, "docs", "bench", name))
        report_md.write(d)
        made = read(d, "report.md")

    def undated(text):
        return [l for l in text.splitlines() if not l.startswith("Written ")]

    committed = read(root, "docs", "bench", "report.md")
    diff = [(x, y) for x, y in zip(undated(committed), undated(made)) if x != y]
    t.check("docs/bench/report.md is what report_md.py makes of the JSON files (but its date)",
            undated(committed) == undated(made), "first difference: %r" % (diff[:1],))
    return t.done()


if __name__ == "__main__":
    sys.exit(main())

"""RESULT lines (DESIGN.md's output convention) and JSON files."""
import json
import os


def result(bench, metric, value, unit, limit, limit_unit=None, ratio=None):
    """Print `RESULT <bench> <metric>=<value><unit> limit=<limit><unit> ratio=<ratio>`; returns a dict."""
    ratio = ratio if ratio is not None else (value / limit if limit else 0.0)
    line = "RESULT %s %s=%.4g%s limit=%.4g%s ratio=%.3f" % (bench, metric, value, unit, limit,
                                                            limit_unit or unit, ratio)
    print(line, flush=True)
    return {"metric": metric, "value": value, "unit": unit, "limit": limit, "ratio": ratio, "line": line}


def paired_median(values, limits):
    """The ratio of a subject against its limit on a machine whose speed changes from minute to minute (this
    shared box switches between states that differ up to fivefold in memory-copy speed). Subject and limit
    runs alternate; each subject run is compared with the limit run just before it, and the pair with the
    median ratio is the figure: a pair that straddles a change of state is an outlier on either side, and
    best-of-each would compare states that never met. Returns (value, limit, ratio, per-pair ratios)."""
    pairs = sorted((v / l if l else 0.0, v, l) for v, l in zip(values, limits))
    if not pairs:
        return 0.0, 0.0, 0.0, []
    ratio, value, limit = pairs[(len(pairs) - 1) // 2]
    return value, limit, ratio, [round(p[0], 4) for p in pairs]


def write_json(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    return path

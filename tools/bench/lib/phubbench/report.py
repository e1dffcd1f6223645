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


def write_json(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    return path

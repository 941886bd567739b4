"""`bench compare A B`: the change between two results.json files, with regressions beyond noise flagged.

A change counts only when the two medians' confidence intervals do not overlap and the medians differ by
more than the protocol's own precision target: anything less is what re-running the same build gives.
"""

from __future__ import annotations

import math
from pathlib import Path

from pocketbert.errors import ConfigError, PocketbertError
from pocketbert.core.files import read_json_object
from pocketbert.mobile_bench.stats import TARGET_RELATIVE_HALF_WIDTH, intervals_overlap
from pocketbert.rundir import BENCH_RESULTS

MIN_RELATIVE_CHANGE = TARGET_RELATIVE_HALF_WIDTH
KEY_FIELDS = ("device", "model", "runtime", "model_format", "precision", "threads", "compute_units", "batch",
              "sequence_length", "tokenization")


def measurement_key(m: dict) -> tuple:
    return tuple(m.get(f) for f in KEY_FIELDS)


def load_results(path: Path, error: type[PocketbertError] = ConfigError) -> dict:
    """A results.json, checked for what comparing and re-deriving read: a measurements list whose rows carry a
    positive, finite median_ms, with key fields of plain values."""
    advice = "pass a results.json written by `pocketbert bench`"
    data = read_json_object(path, error, advice, BENCH_RESULTS)
    measurements = data.get("measurements")
    if not isinstance(measurements, list):
        raise error(f"{path} is not a pocketbert results.json (no measurements list); {advice}")
    for i, m in enumerate(measurements):
        where = f"{path}: measurements[{i}]"
        if not isinstance(m, dict):
            raise error(f"{where} is not an object; {advice}")
        median = m.get("median_ms")
        if isinstance(median, bool) or not isinstance(median, (int, float)) or not (0 < median < math.inf):
            raise error(f"{where}: median_ms must be a positive number (got {median!r}); {advice}")
        for key in ("ci_low_ms", "ci_high_ms"):
            if m.get(key) is not None and (isinstance(m[key], bool) or not isinstance(m[key], (int, float))):
                raise error(f"{where}: {key} must be a number or null (got {m[key]!r}); {advice}")
        if any(isinstance(m.get(f), (dict, list)) for f in KEY_FIELDS):
            raise error(f"{where}: {', '.join(KEY_FIELDS)} must be plain values; {advice}")
    if not isinstance(data.get("host", {}), dict):
        raise error(f"{path}: 'host' must be an object; {advice}")
    return data


def classify(before: dict, after: dict) -> str:
    change = after["median_ms"] / before["median_ms"] - 1.0
    if abs(change) <= MIN_RELATIVE_CHANGE:
        return "same"
    if None in (before.get("ci_low_ms"), after.get("ci_low_ms")):
        return "slower (no interval)" if change > 0 else "faster (no interval)"
    if intervals_overlap(before, after):
        return "within noise"
    return "regression" if change > 0 else "improvement"


def compare_results(before: dict, after: dict) -> dict:
    old = {measurement_key(m): m for m in before["measurements"]}
    new = {measurement_key(m): m for m in after["measurements"]}
    rows = []
    for key in sorted(old.keys() & new.keys(), key=lambda k: tuple(str(x) for x in k)):
        a, b = old[key], new[key]
        rows.append({**dict(zip(KEY_FIELDS, key)), "before_ms": a["median_ms"], "after_ms": b["median_ms"],
                     "change": b["median_ms"] / a["median_ms"] - 1.0, "verdict": classify(a, b)})
    different_host = before.get("host", {}).get("cpu") != after.get("host", {}).get("cpu")
    return {
        "rows": rows,
        "only_before": len(old.keys() - new.keys()),
        "only_after": len(new.keys() - old.keys()),
        "regressions": sum(r["verdict"] == "regression" for r in rows),
        "improvements": sum(r["verdict"] == "improvement" for r in rows),
        "different_host": different_host,
    }


def render_comparison(result: dict) -> str:
    lines = ["| model | runtime | format | precision | threads/units | batch | seq | tokenization | before ms | after ms | change | verdict |",
             "|---|---|---|---|---|---:|---:|---|---:|---:|---:|---|"]
    for r in result["rows"]:
        setting = r["threads"] if r["threads"] is not None else r["compute_units"]
        device = "" if r["device"] in (None, "host") else f" ({r['device']})"
        lines.append(f"| {r['model']}{device} | {r['runtime']} | {r['model_format']} | {r['precision']} | {setting} "
                     f"| {r['batch']} | {r['sequence_length']} | {r['tokenization']} | {r['before_ms']:.2f} "
                     f"| {r['after_ms']:.2f} | {100 * r['change']:+.1f} % | {r['verdict']} |")
    lines.append("")
    lines.append(f"{result['regressions']} regression(s), {result['improvements']} improvement(s) beyond noise; "
                 f"{result['only_before']} measurement(s) only in the first file, {result['only_after']} only in the second.")
    if result["different_host"]:
        lines.append("warning: the two files were measured on different CPUs; differences reflect the machines.")
    return "\n".join(lines)

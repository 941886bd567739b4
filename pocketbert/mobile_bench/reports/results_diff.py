"""`bench compare A B`: the change between two results.json files, with regressions beyond noise flagged.

A change counts only when the two medians' confidence intervals do not overlap and the medians differ by
more than the protocol's own precision target: anything less is what re-running the same build gives. A
measurement without an interval (a phone import: Xcode reports a median alone) has no noise estimate, so it is
held to a stated relative threshold instead of being passed.

As a CI gate (exit status 0 means "nothing got slower"), a comparison that did not compare is refused rather
than passed: an empty measurements list, a setting measured twice in one file, nothing in common, or a
measurement of the first file (the baseline) that the second lacks, unless the caller allows it.
"""

from __future__ import annotations

import math
from pathlib import Path

from pocketbert.core.errors import ConfigError, PocketbertError
from pocketbert.core.files import read_json_object
from pocketbert.mobile_bench.timing.stats import TARGET_RELATIVE_HALF_WIDTH, intervals_overlap
from pocketbert.core.run.run_files import BENCH_RESULTS

MIN_RELATIVE_CHANGE = TARGET_RELATIVE_HALF_WIDTH
# A measurement without an interval is a regression when it is this much slower (in %). 10 %: five times the 2 %
# the bench protocol measures a median to, so that re-running an unchanged build (whose noise on a phone is not
# known) rarely crosses it, while a slowdown a user would notice does; --threshold sets a tighter or looser gate.
DEFAULT_THRESHOLD_PERCENT = 10.0
REGRESSION, IMPROVEMENT = "regression", "improvement"
NO_INTERVAL = " (no interval)"
# program: the kit names each program (or function of a multifunction package) it measured on a device, and two
# programs of one precision and length are two settings
KEY_FIELDS = ("device", "model", "program", "runtime", "model_format", "precision", "threads", "compute_units",
              "batch", "sequence_length", "tokenization")


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


def has_interval(m: dict) -> bool:
    return m.get("ci_low_ms") is not None and m.get("ci_high_ms") is not None


def classify(before: dict, after: dict, threshold_percent: float = DEFAULT_THRESHOLD_PERCENT) -> str:
    change = after["median_ms"] / before["median_ms"] - 1.0
    if not (has_interval(before) and has_interval(after)):
        if abs(change) * 100 <= threshold_percent:
            return "within threshold" + NO_INTERVAL
        return (REGRESSION if change > 0 else IMPROVEMENT) + NO_INTERVAL
    if abs(change) <= MIN_RELATIVE_CHANGE:
        return "same"
    if intervals_overlap(before, after):
        return "within noise"
    return REGRESSION if change > 0 else IMPROVEMENT


def describe_key(key: tuple) -> str:
    return ", ".join(f"{field} {value}" for field, value in zip(KEY_FIELDS, key) if value is not None)


def rows_by_key(path: Path, results: dict) -> dict[tuple, dict]:
    """The file's measurements by setting; an empty list or a setting measured twice is refused (the second row
    would silently replace the first)."""
    measurements = results["measurements"]
    if not measurements:
        raise ConfigError(f"{path} holds no measurements: there is nothing to compare; pass a results.json "
                          "written by `pocketbert bench`")
    seen: dict[tuple, int] = {}
    for i, m in enumerate(measurements):
        key = measurement_key(m)
        if key in seen:
            raise ConfigError(f"{path}: measurements[{seen[key]}] and measurements[{i}] measure the same setting "
                              f"({describe_key(key)}): keep one of them")
        seen[key] = i
    return {key: measurements[i] for key, i in seen.items()}


def compare_results(before: dict, after: dict, threshold_percent: float = DEFAULT_THRESHOLD_PERCENT,
                    allow_missing: bool = False, names: tuple = ("the first file", "the second file")) -> dict:
    """The rows both files measured, each with its verdict. ConfigError when the comparison would vouch for
    what it did not compare: nothing in common, or (unless allow_missing) a baseline measurement the second
    file lacks."""
    old, new = rows_by_key(names[0], before), rows_by_key(names[1], after)
    common = old.keys() & new.keys()
    if not common:
        raise ConfigError(f"{names[0]} and {names[1]} have no measurement in common (same {', '.join(KEY_FIELDS)}): "
                          "compare results of the same bench plan")
    missing = sorted(old.keys() - new.keys(), key=lambda k: tuple(str(x) for x in k))
    if missing and not allow_missing:
        raise ConfigError(f"{len(missing)} measurement(s) of {names[0]} are not in {names[1]} (first: "
                          f"{describe_key(missing[0])}): measure them too, or pass --allow-missing to compare "
                          "the rest")
    rows = []
    for key in sorted(common, key=lambda k: tuple(str(x) for x in k)):
        a, b = old[key], new[key]
        rows.append({**dict(zip(KEY_FIELDS, key)), "before_ms": a["median_ms"], "after_ms": b["median_ms"],
                     "change": b["median_ms"] / a["median_ms"] - 1.0, "verdict": classify(a, b, threshold_percent)})
    different_host = before.get("host", {}).get("cpu") != after.get("host", {}).get("cpu")
    return {
        "rows": rows,
        "only_before": len(missing),
        "only_after": len(new.keys() - old.keys()),
        "regressions": sum(r["verdict"].startswith(REGRESSION) for r in rows),
        "improvements": sum(r["verdict"].startswith(IMPROVEMENT) for r in rows),
        "without_interval": sum(r["verdict"].endswith(NO_INTERVAL) for r in rows),
        "threshold_percent": threshold_percent,
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
                 f"{result['only_before']} measurement(s) only in the first file (not compared), "
                 f"{result['only_after']} only in the second.")
    if result["without_interval"]:
        lines.append(f"{result['without_interval']} measurement(s) without an interval held to the threshold: a "
                     f"change over {result['threshold_percent']:g} % counts.")
    if result["different_host"]:
        lines.append("warning: the two files were measured on different CPUs; differences reflect the machines.")
    return "\n".join(lines)

"""What the report states, derived from the raw measurements, graph costs and profiles in results.json.

Pure functions of results.json's raw sections, so importing a phone measurement later re-derives everything
without measuring again. Measured and estimated figures stay in separate rows, marked by "kind".
"""

from __future__ import annotations

from pathlib import Path

from pocketbert.mobile_bench.estimates import app_latency, calibration, roofline
from pocketbert.mobile_bench.estimates.placement_verdict import UNCHECKED, unit_for

STUDENT, BERT_BASE, TEACHER, HALF_DEPTH = "student", "bert-base", "teacher", "half-depth"
ARCHITECTURE_RATIO_BAR = 0.52  # a 6-of-12-layer student at sequence 128, ORT, 1 thread: at most this × BERT-base
HOST = "host"


def _shape_key(m: dict) -> tuple:
    return (m.get("device", HOST), m["runtime"], m["model_format"], m["precision"], m.get("threads"),
            m.get("compute_units"), m["batch"], m["sequence_length"], m.get("tokenization", "excluded"))


def headline_rows(results: dict) -> list[dict]:
    proto = results["protocol"]
    return [m for m in results["measurements"]
            if m["batch"] == proto["batch_size"] and m["sequence_length"] == proto["sequence_length"]
            and m.get("tokenization", "excluded") == "excluded"]


def _size(results: dict, model: str, model_format: str, precision: str) -> int | None:
    files = results["models"].get(model, {}).get("files", {})
    entry = files.get(f"{model_format}-{precision}")
    return entry["size_bytes"] if entry else None


def _full_vocabulary_size(results: dict, model_format: str, precision: str) -> int | None:
    """The student file's size had it kept the full vocabulary, where the export fitted it and measured that."""
    full_sizes = (results.get("vocabulary") or {}).get("full_vocabulary_sizes_bytes") or {}
    entry = results["models"].get(STUDENT, {}).get("files", {}).get(f"{model_format}-{precision}")
    return full_sizes.get(Path(entry["path"]).name) if full_sizes and entry else None


def measured_comparisons(results: dict) -> list[dict]:
    """Student against each baseline measured on the same device, runtime, format, precision and setting."""
    rows_by_key = {}
    for m in headline_rows(results):
        rows_by_key.setdefault(_shape_key(m), {})[m["model"]] = m
    out = []
    for models in rows_by_key.values():
        student = models.get(STUDENT)
        if student is None:
            continue
        for baseline in (BERT_BASE, TEACHER):
            other = models.get(baseline)
            if other is None:
                continue
            s_size = _size(results, STUDENT, student["model_format"], student["precision"])
            b_size = _size(results, baseline, other["model_format"], other["precision"])
            full = _full_vocabulary_size(results, student["model_format"], student["precision"])
            out.append({
                "kind": "measured", "baseline": baseline, "device": student.get("device", HOST),
                "runtime": student["runtime"], "model_format": student["model_format"],
                "precision": student["precision"], "threads": student.get("threads"),
                "compute_units": student.get("compute_units"),
                "student_ms": student["median_ms"], "baseline_ms": other["median_ms"],
                "latency_ratio": student["median_ms"] / other["median_ms"],
                "percent_faster": 100.0 * (other["median_ms"] / student["median_ms"] - 1.0),
                "size_ratio": b_size / s_size if s_size and b_size else None,
                "size_ratio_full_vocabulary": b_size / full if full and b_size else None,
            })
    return sorted(out, key=lambda r: (r["baseline"], r["device"], r["runtime"], r["model_format"], r["precision"],
                                      r["threads"] or 0, r["compute_units"] or ""))


def student_verdict(results: dict) -> dict | None:
    """The placement verdict of the student's Apple program that the phone rows stand for (None: unchecked)."""
    placement = results.get("placement") or {}
    return (placement.get("verdicts") or {}).get(placement.get("student_program") or "")


def _figures(row: dict | None) -> dict:
    keys = ("floor_ms", "calibrated_ms", "calibrated_low_ms", "calibrated_high_ms", "calibration_points")
    return {k: (row or {}).get(k) for k in keys}


def estimated_comparisons(estimates: list[dict], verdict: dict | None = None,
                          program: str | None = None) -> list[dict]:
    """Student against each baseline on each phone, unit and precision: floors and calibrated estimates side
    by side. A Neural Engine row takes the student's floor on the unit its program is predicted on (a GPU or CPU
    fallback), and says when no verdict exists; BERT-base has no exported program, so its Neural Engine figure
    is always unchecked."""
    by_key = {}
    for e in estimates:
        by_key.setdefault((e["device"], e["compute_unit"], e["precision"]), {})[e["model"]] = e
    out = []
    for (device, unit, precision), models in sorted(by_key.items()):
        student_unit, placement = unit_for(unit, verdict)
        student = (by_key.get((device, student_unit, precision)) or {}).get(STUDENT)
        for baseline in (BERT_BASE, TEACHER):
            other = models.get(baseline)
            if models.get(STUDENT) is None or other is None:
                continue
            s, b = _figures(student), _figures(other)
            ratio = s["floor_ms"] / b["floor_ms"] if s["floor_ms"] else None
            out.append({"kind": "estimated", "baseline": baseline, "device": device, "compute_unit": unit,
                        "precision": precision, "student_unit": student_unit if student else None,
                        "student_program": program,  # the program the row describes: the one the iOS folder ships
                        "placement": placement if student else f"{placement}; no {student_unit} profile",
                        "baseline_placement": UNCHECKED if unit == "neural_engine" else "not needed",
                        **{f"student_{k}": v for k, v in s.items()}, **{f"baseline_{k}": v for k, v in b.items()},
                        "latency_ratio": ratio,
                        "percent_faster": 100.0 * (1.0 / ratio - 1.0) if ratio else None,
                        "size_ratio": other["bytes"] / models[STUDENT]["bytes"]})
    return out


def device_estimates(results: dict) -> list[dict]:
    """Roofline floors for every phone profile, with measured / floor where a phone measurement was imported."""
    costs = results["graph_costs"]["headline"]
    factors = results["calibration"]["factors"]
    rows = []
    for key, profile in results["profiles"].items():
        for row in roofline.device_estimates(key, profile, costs):
            row["family"] = profile.get("family")
            rows.append({**row, **calibration.calibrate(row["floor_ms"], row["family"], row["compute_unit"],
                                                        row["precision"], factors)})
    imported = [m for m in headline_rows(results) if m.get("device", HOST) != HOST]
    for row in rows:
        match = next((m for m in imported if m["device"] == row["device"] and m["model"] == row["model"]
                      and roofline.COREML_UNIT_FOR.get(m.get("compute_units")) == row["compute_unit"]
                      and m["precision"] == row["precision"]), None)
        row["measured_ms"] = match["median_ms"] if match else None
        row["measured_over_floor"] = match["median_ms"] / row["floor_ms"] if match else None
    return rows


def host_estimates(results: dict) -> list[dict]:
    """measured / floor for each fp32 measurement on this host whose shape has a counted graph cost."""
    sweep_costs = results["graph_costs"].get("by_shape", {})
    rows = []
    for m in results["measurements"]:
        if m.get("device", HOST) != HOST or m.get("tokenization", "excluded") != "excluded":
            continue
        cost = sweep_costs.get(m["model"], {}).get(f"{m['batch']}x{m['sequence_length']}")
        floor = roofline.host_floor(m, results["host_profile"], cost) if cost and m.get("threads") else None
        if floor:
            rows.append({"model": m["model"], "runtime": m["runtime"], "model_format": m["model_format"],
                         "precision": m["precision"], "threads": m["threads"], "batch": m["batch"],
                         "sequence_length": m["sequence_length"], "measured_ms": m["median_ms"], **floor,
                         "measured_over_floor": m["median_ms"] / floor["floor_ms"]})
    return rows


def architecture_check(results: dict) -> dict | None:
    """The half-depth student against BERT-base, timed in turn: measured latency ratio beside the FLOP ratio."""
    pair = results.get("architecture_pair")
    costs = results["graph_costs"]["headline"]
    if not pair or HALF_DEPTH not in costs:
        return None
    student_ms, bert_ms = pair[HALF_DEPTH]["median_ms"], pair[BERT_BASE]["median_ms"]
    ratio = student_ms / bert_ms
    return {"student": results["models"][HALF_DEPTH]["description"], "runtime": pair["runtime"],
            "sequence_length": pair["sequence_length"], "batch": pair["batch"], "order": pair["order"],
            "student_ms": student_ms, "bert_base_ms": bert_ms, "latency_ratio": ratio,
            "flop_ratio": costs[HALF_DEPTH]["flops"] / costs[BERT_BASE]["flops"],
            "bar": ARCHITECTURE_RATIO_BAR, "passes": ratio <= ARCHITECTURE_RATIO_BAR}


def export_variants(results: dict) -> list[dict]:
    """Every exported artifact: size, task metric on its own runtime, agreement, and latency where measured."""
    acc = results["accuracy"]
    threads = min(results["protocol"]["threads"])
    rows = []
    for name, variant in acc["exported"].items():
        fmt, precision = variant["model_format"], variant["precision"]
        latency = next((m for m in headline_rows(results)
                        if m["model"] == STUDENT and m["model_format"] == fmt and m["precision"] == precision
                        and m.get("device", HOST) == HOST and (m.get("threads") in (threads, None))), None)
        rows.append({"artifact": name, "model_format": fmt, "precision": precision, "size_bytes": variant["size_bytes"],
                     "metric": variant["value"], "agreement_with_student": variant["agreement_with_student"],
                     "runtime": variant["runtime"], "n_examples": variant["n_examples"],
                     "latency_ms": latency["median_ms"] if latency else None,
                     "latency_setting": (latency.get("threads") or latency.get("compute_units")) if latency else None})
    return rows


def derive(results: dict) -> dict:
    results["comparisons"] = measured_comparisons(results)
    # the published points and their factors, recomputed from the package's table on every derive (an import
    # re-derives an older results.json with the current table)
    results["calibration"] = calibration.calibration_table(results["profiles"])
    results["estimates"] = {"devices": device_estimates(results), "host": host_estimates(results)}
    results["estimated_comparisons"] = estimated_comparisons(results["estimates"]["devices"], student_verdict(results),
                                                             (results.get("placement") or {}).get("student_program"))
    student_cost = results["graph_costs"]["headline"].get(STUDENT) or {}
    results["app_latency"] = {
        "estimated": app_latency.estimated_stages(results["estimates"]["devices"], results["calibration"]["regimes"]),
        "android": app_latency.android_classes(results["calibration"]["points"], student_cost.get("flops"),
                                               results["protocol"]["sequence_length"])}
    results["architecture_check"] = architecture_check(results)
    results["variants"] = export_variants(results)
    return results

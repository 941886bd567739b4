"""Latency as an app sees it: the stages of a model's life in an app (load, first prediction, steady p50/p90,
the first call after the device idled, sustained use) for estimated rows and for what the device kit measured,
and the Android estimates per SoC class.

Estimated rows take the published factors of calibration.yaml's regimes where a source gives them (the Neural
Engine's re-wake after idle, its sustained slowdown); a stage no source prices is left empty, never guessed.
"""

from __future__ import annotations

from pocketbert.mobile_bench.estimates.model_shape import SHAPE_KINDS

STUDENT = "student"
SOC_CLASSES = {  # calibration.yaml's soc_class -> how the report names the row
    "flagship-npu": "flagship NPU",
    "mid-tier-cpu-fallback": "mid-tier, CPU fallback (the NPU path not taken)",
    "cpu": "CPU (TFLite/XNNPACK)",
}


def estimated_stages(estimates: list[dict], regimes: dict) -> list[dict]:
    """Per phone, unit and precision, the student's steady estimate (calibrated, else the floor) with the first
    call after idle and the sustained figure where a published regime covers the unit."""
    idle, sustained = regimes.get("cold_after_idle") or {}, regimes.get("sustained") or {}
    call_floor = regimes.get("call_floor") or {}
    rows = []
    for e in estimates:
        if e["model"] != STUDENT:
            continue
        steady = e.get("calibrated_ms") or e["floor_ms"]
        steady_is = "calibrated" if e.get("calibrated_ms") else "floor"
        if call_floor.get("compute_unit") == e["compute_unit"] and steady < call_floor["ms"]:
            steady, steady_is = call_floor["ms"], "the per-call floor"  # no call is faster, whatever its FLOPs
        row = {"device": e["device"], "compute_unit": e["compute_unit"], "precision": e["precision"],
               "steady_ms": steady, "steady_is": steady_is,
               "after_idle_ms": None, "idle_s": None, "after_idle_source": None,
               "sustained_ms": None, "sustained_after_calls": None, "sustained_source": None}
        if idle.get("compute_unit") == e["compute_unit"]:
            row.update(after_idle_ms=steady + idle["added_ms"], idle_s=idle["idle_s"], after_idle_source=idle["source"])
        if sustained.get("compute_unit") == e["compute_unit"]:
            row.update(sustained_ms=steady * sustained["sustained_ms"] / sustained["burst_ms"],
                       sustained_after_calls=sustained["after_calls"], sustained_source=sustained["source"])
        rows.append(row)
    return rows


def android_classes(points: list[dict], student_flops: float | None, sequence_length: int) -> list[dict]:
    """One row per Android SoC class and published point: the published figure and the student's estimate
    scaled from it by FLOPs (no peak rates are published for these SoCs' NPUs, so no floor applies)."""
    rows = []
    for p in points:
        if p.get("soc_class") not in SOC_CLASSES:
            continue
        kind, fields = p["shape_fields"]["kind"], {k: v for k, v in p["shape_fields"].items() if k != "kind"}
        point_flops = SHAPE_KINDS[kind](**fields).cost(p["sequence_length"], p["batch"])["flops"] \
            if None not in fields.values() and p["sequence_length"] else None
        scaled = p["measured_ms"] * student_flops / point_flops if student_flops and point_flops else None
        rows.append({"soc_class": p["soc_class"], "class_name": SOC_CLASSES[p["soc_class"]], "id": p["id"],
                     "device_name": p["device_name"], "compute_unit": p["compute_unit"], "precision": p["precision"],
                     "runtime": p["runtime"], "published_ms": p["measured_ms"],
                     "published_sequence": p["sequence_length"], "student_sequence": sequence_length,
                     "student_scaled_ms": scaled, "source": p["source"]})
    order = list(SOC_CLASSES)
    return sorted(rows, key=lambda r: (order.index(r["soc_class"]), r["published_ms"]))

"""Latencies measured on a phone, brought into the results schema beside what was measured here.

Two inputs are read:
- coremltools' remote-device benchmarking (coremltools.models.ml_program.experimental): its
  MLModelBenchmarker returns Measurement objects; `dataclasses.asdict` of the predict (and load) measurement,
  with the device and compute units, saved as JSON (the README shows the five lines).
- Xcode's Core ML performance report: the medians it shows (load, prediction, compilation) with the device,
  OS and compute units, written as JSON under the key "xcode_performance_report".
"""

from __future__ import annotations

import math
from pathlib import Path

from pocketbert.errors import ConfigError
from pocketbert.core.files import read_json_object
from pocketbert.mobile_bench.stats import summarize

COMPUTE_UNIT_NAMES = {  # what Xcode and coremltools print, to the ct.ComputeUnit names used in results
    "all": "ALL", "cpu_only": "CPU_ONLY", "cpu only": "CPU_ONLY", "cpu_and_gpu": "CPU_AND_GPU",
    "cpu and gpu": "CPU_AND_GPU", "cpu_and_ne": "CPU_AND_NE", "cpu and neural engine": "CPU_AND_NE",
}
IMPORT_FORMATS = ("coremltools", "xcode")


def _compute_units(raw, where: str) -> str:
    name = COMPUTE_UNIT_NAMES.get(str(raw or "").strip().lower().removeprefix("computeunit."))
    if name is None:
        raise ConfigError(f"{where}: compute_units must be one of All, CPU_ONLY, CPU_AND_GPU, CPU_AND_NE "
                          f"(got '{raw}')")
    return name


def _positive(raw, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ConfigError(f"{where} must be a number of milliseconds (got {raw!r})")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be a number of milliseconds (got '{raw}')") from None
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{where} must be positive and finite, in milliseconds (got {raw!r})")
    return value


def _object(raw, where: str) -> dict:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a JSON object (got {type(raw).__name__})")
    return raw


def parse_phone_measurement(data: dict, where: str) -> dict:
    """The measurement fields a phone file provides: device, OS, compute units, latency statistics, load time."""
    if "xcode_performance_report" in data:
        report = _object(data["xcode_performance_report"], f"{where}: xcode_performance_report")
        median = _positive(report.get("prediction_median_ms"), f"{where}: prediction_median_ms")
        row = {"format": "xcode", "median_ms": median, "ci_low_ms": None, "ci_high_ms": None,
               "ci_relative_half_width": None, "repeats": report.get("iterations"), "converged": None,
               "stop_reason": "Xcode performance report (median only)"}
        load = report.get("load_median_ms")
        cold = {"load_ms": _positive(load, f"{where}: load_median_ms")} if load is not None else None
    elif "predict" in data:
        samples = _object(data["predict"] or {}, f"{where}: predict").get("samples") or []
        if not isinstance(samples, list):
            raise ConfigError(f"{where}: predict.samples must be a list of milliseconds")
        samples = [_positive(s, f"{where}: predict.samples") for s in samples]
        if not samples:
            raise ConfigError(f"{where}: predict.samples is empty; benchmark with iterations > 0")
        stats = summarize(samples, "coremltools MLModelBenchmarker samples").to_dict()
        row = {"format": "coremltools", **stats}
        load_samples = _object(data.get("load") or {}, f"{where}: load").get("samples") or []
        if not isinstance(load_samples, list):
            raise ConfigError(f"{where}: load.samples must be a list of milliseconds")
        cold = {"load_ms": summarize([_positive(s, f"{where}: load.samples") for s in load_samples]).median_ms} \
            if load_samples else None
        report = data
    else:
        raise ConfigError(f"{where}: not a phone measurement: expected a coremltools benchmark JSON (with 'predict') "
                          "or an 'xcode_performance_report' object")
    device = report.get("device")
    device = device.strip() if isinstance(device, str) else ""
    if not device:
        raise ConfigError(f"{where}: name the phone in 'device' (for example \"iPhone 15 Pro\")")
    os_name = report.get("os")
    if os_name is not None and not isinstance(os_name, str):
        raise ConfigError(f"{where}: 'os' must be text like \"iOS 17.4\" (got {os_name!r})")
    repeats = row.get("repeats")
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        raise ConfigError(f"{where}: iterations must be a positive whole number (got {repeats!r})")
    return {**row, "device_name": device, "os": os_name,
            "compute_units": _compute_units(report.get("compute_units"), where), "cold_start": cold}


def import_phone_file(path: Path, device_key: str, model: str, precision: str, batch: int,
                      sequence_length: int) -> dict:
    """One measurement row in the results schema, marked as measured on the named device."""
    where = str(path)
    data = read_json_object(path, ConfigError, "export the measurement as JSON", "phone measurement")
    parsed = parse_phone_measurement(data, where)
    cold = parsed.pop("cold_start")
    return {"model": model, "runtime": "coreml", "model_format": "mlpackage", "precision": precision,
            "threads": None, "batch": batch, "sequence_length": sequence_length, "tokenization": "excluded",
            "sweep": "headline", "device": device_key, "source": f"imported from {Path(path).name} ({parsed['format']})",
            "cold_start": cold, **{k: v for k, v in parsed.items() if k != "format"}}

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
import re
from pathlib import Path

from pocketbert.core.errors import ConfigError
from pocketbert.core.files import read_json_object
from pocketbert.mobile_bench.timing.stats import summarize

COMPUTE_UNIT_NAMES = {  # what Xcode and coremltools print, to the ct.ComputeUnit names used in results
    "all": "ALL", "cpu_only": "CPU_ONLY", "cpu only": "CPU_ONLY", "cpu_and_gpu": "CPU_AND_GPU",
    "cpu and gpu": "CPU_AND_GPU", "cpu_and_ne": "CPU_AND_NE", "cpu and neural engine": "CPU_AND_NE",
}
IMPORT_FORMATS = ("coremltools", "xcode", "kit")
KIT_SCHEMA_KEY = "pocketbert_kit"  # the kit's JSON (bench kit): its schema version under this key
KIT_SCHEMA = 3  # 2: each program names the sha256 of the program it measured; 3: the tokenizer check, and a
# multifunction package measured function by function
KIT_SCHEMAS_READ = (2, 3)
FUNCTION_SEPARATOR = "#"  # a multifunction package's function measured on its own: "<package>#<function>"
TOKENIZER_DIFFERENCES_KEPT = 5  # the first differing golden texts kept (the kit writes as many at most)
KIT_RUNTIMES = {"coreml": "mlpackage", "coreai": "aimodel"}  # runtime -> model format, as results.json says them
PLACEMENT_UNITS = ("neural_engine", "gpu", "cpu", "unknown")
IDLE_MIN_S = 5.0          # the Neural Engine re-wakes after > 5 s idle (arXiv 2606.22283): a shorter pause is warm
SUSTAINED_MIN_CALLS = 1000  # the Neural Engine's sustained state begins ~830 calls into a run (coreai-model-zoo)
KILLED_STAGES = ("load", "first_prediction", "warm")
# No phone takes ten minutes for one call of a model an app ships: a larger figure is seconds or microseconds
# mistaken for milliseconds, or a damaged file.
MAX_PLAUSIBLE_MS = 600_000.0


def _count(raw, where: str, least: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < least:
        raise ConfigError(f"{where} must be a whole number of at least {least} (got {raw!r})")
    return raw


def _app_stages(program: dict, here: str) -> dict:
    """The stages past warm-up the kit measures where asked: the first call after an idle pause, sustained use,
    and the tokenizer's own time; each absent (None) where the kit did not measure it."""
    idle = program.get("after_idle")
    if idle is not None:
        idle = _object(idle, f"{here}: after_idle")
        idle_s = _positive(idle.get("idle_s"), f"{here}: after_idle.idle_s")
        if idle_s < IDLE_MIN_S:
            raise ConfigError(f"{here}: after_idle.idle_s must be at least {IDLE_MIN_S:g} s (got {idle_s:g}); a "
                              "shorter pause measures a warm call")
        idle = {"idle_s": idle_s, "first_call_ms": _positive(idle.get("first_call_ms"),
                                                             f"{here}: after_idle.first_call_ms")}
    sustained = program.get("sustained")
    if sustained is not None:
        sustained = _object(sustained, f"{here}: sustained")
        samples = sustained.get("samples_ms")
        if not isinstance(samples, list) or not samples:
            raise ConfigError(f"{here}: sustained.samples_ms must be a non-empty list of milliseconds")
        calls = _count(sustained.get("calls"), f"{here}: sustained.calls", SUSTAINED_MIN_CALLS)
        stats = summarize([_positive(v, f"{here}: sustained.samples_ms") for v in samples], "sustained").to_dict()
        sustained = {"calls": calls, "p50_ms": stats["median_ms"], "p90_ms": stats["p90_ms"]}
    tokenizer = program.get("tokenizer_samples_ms")
    if tokenizer is not None:
        if not isinstance(tokenizer, list) or not tokenizer:
            raise ConfigError(f"{here}: tokenizer_samples_ms must be a non-empty list of milliseconds")
        tokenizer = summarize([_positive(v, f"{here}: tokenizer_samples_ms") for v in tokenizer],
                              "tokenizer").median_ms
    return {"after_idle": idle, "sustained": sustained, "tokenizer_ms": tokenizer}


def _killed(raw, here: str) -> dict | None:
    if raw is None:
        return None
    raw = _object(raw, f"{here}: killed")
    if raw.get("stage") not in KILLED_STAGES:
        raise ConfigError(f"{here}: killed.stage must be one of {', '.join(KILLED_STAGES)} (got {raw.get('stage')!r})")
    return {"stage": raw["stage"], "note": str(raw.get("note") or "")}
# A measurement file is a few kilobytes (the kit's: 300 samples and a plan of some thousand operations per program
# and setting); a file larger than this is not one, and is refused before it is read.
MAX_MEASUREMENT_BYTES = 16 * 1024 * 1024
SHA256 = re.compile(r"[0-9a-f]{64}")


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
    if value > MAX_PLAUSIBLE_MS:
        raise ConfigError(f"{where}: {raw!r} ms is more than {MAX_PLAUSIBLE_MS:,.0f} ms (ten minutes) for one call: "
                          "give milliseconds, as the kit and Xcode write them")
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


def read_measurement(path: Path) -> dict:
    """The file's JSON object, its size checked before a byte is read."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = 0  # a missing or unreadable file: read_json_object says which, in one line
    if size > MAX_MEASUREMENT_BYTES:
        raise ConfigError(f"{path} is {size} bytes; a measurement is at most {MAX_MEASUREMENT_BYTES} "
                          "(the kit's JSON or a benchmark's): name the measurement file")
    return read_json_object(path, ConfigError, "export the measurement as JSON", "phone measurement")


def _program_sha256(raw, where: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not SHA256.fullmatch(raw):
        raise ConfigError(f"{where}: sha256 must be the 64 hex digits the export's manifest records for the "
                          f"program (got {raw!r})")
    return raw


def import_phone_file(path: Path, device_key: str, model: str, precision: str, batch: int,
                      sequence_length: int, data: dict | None = None) -> dict:
    """One measurement row in the results schema, marked as measured on the named device."""
    where = str(path)
    data = read_measurement(path) if data is None else data
    parsed = parse_phone_measurement(data, where)
    cold = parsed.pop("cold_start")
    return {"model": model, "runtime": "coreml", "model_format": "mlpackage", "precision": precision,
            "threads": None, "batch": batch, "sequence_length": sequence_length, "tokenization": "excluded",
            "sweep": "headline", "device": device_key, "source": f"imported from {Path(path).name} ({parsed['format']})",
            "cold_start": cold, "program_sha256": _program_sha256(data.get("program_sha256"), f"{where}: program"),
            **{k: v for k, v in parsed.items() if k != "format"}}


def _kit_placement(raw, where: str) -> dict | None:
    """The plan the device reported (MLComputePlan), counted per unit; None where the runtime reports none."""
    if raw is None:
        return None
    raw = _object(raw, f"{where}: placement")
    operations = raw.get("operations") or []
    if not isinstance(operations, list):
        raise ConfigError(f"{where}: placement.operations must be a list")
    counts = {unit: 0 for unit in PLACEMENT_UNITS}
    for op in operations:
        unit = _object(op, f"{where}: placement.operations[]").get("preferred")
        if unit not in counts:
            raise ConfigError(f"{where}: an operation's 'preferred' must be one of {', '.join(PLACEMENT_UNITS)} "
                              f"(got {unit!r})")
        counts[unit] += 1
    return {"source": str(raw.get("source") or "device"), "operation_counts": counts,
            "operations": len(operations), "note": raw.get("note")}


def package_of(program: str) -> str:
    """The program file a measured program's name names (a multifunction package's, for one of its functions)."""
    return program.split(FUNCTION_SEPARATOR, 1)[0]


def _function(program: dict, name: str, here: str) -> str | None:
    """The function of a multifunction package a row measured (named after its package, `<package>#<function>`);
    None for a program's one function."""
    given = program.get("function")
    package, separator, function = name.partition(FUNCTION_SEPARATOR)
    if not separator:
        if given is not None:
            raise ConfigError(f"{here}: function {given!r} measured, but the program is not named "
                              f"<package>{FUNCTION_SEPARATOR}<function> (got {name!r})")
        return None
    if not package or not function or (given is not None and given != function):
        raise ConfigError(f"{here}: a function of a multifunction package is named <package>{FUNCTION_SEPARATOR}"
                          f"<function> with that function in 'function' (got {name!r} and {given!r})")
    return function


def _ids(raw, where: str) -> list[int]:
    if not isinstance(raw, list) or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in raw):
        raise ConfigError(f"{where} must be a list of token ids (whole numbers from 0)")
    return raw


def _tokenizer_check(raw, where: str) -> dict:
    """The golden texts run through the app's tokenizer on the device: how many were checked, how many gave other
    ids, the first of those (text, expected and got ids), and the digests of the files checked."""
    here = f"{where}: tokenizer_check"
    check = _object(raw, here)
    checked = _count(check.get("texts_checked"), f"{here}.texts_checked", 1)
    differing = _count(check.get("texts_differing"), f"{here}.texts_differing", 0)
    if differing > checked:
        raise ConfigError(f"{here}: texts_differing ({differing}) is more than texts_checked ({checked})")
    shown = check.get("first_differences")
    if not isinstance(shown, list) or len(shown) > differing or (differing and not shown):
        raise ConfigError(f"{here}.first_differences must list the first of the {differing} differing texts "
                          f"(got {len(shown) if isinstance(shown, list) else repr(shown)})")
    differences = []
    for i, entry in enumerate(shown[:TOKENIZER_DIFFERENCES_KEPT]):
        entry = _object(entry, f"{here}.first_differences[{i}]")
        if not isinstance(entry.get("text"), str):
            raise ConfigError(f"{here}.first_differences[{i}].text must be the golden text")
        expected = _ids(entry.get("expected_ids"), f"{here}.first_differences[{i}].expected_ids")
        got = _ids(entry.get("got_ids"), f"{here}.first_differences[{i}].got_ids")
        if expected == got:
            raise ConfigError(f"{here}.first_differences[{i}] gives the expected ids: it is not a difference")
        differences.append({"probe": str(entry.get("probe") or ""), "text": entry["text"], "expected_ids": expected,
                            "got_ids": got})
    digests = {}
    for key in ("tables_sha256", "golden_sha256"):
        digest = check.get(key)
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise ConfigError(f"{here}.{key} must be the 64 hex digits the export's manifest records for the file "
                              f"checked (got {digest!r})")
        digests[key] = digest
    return {"texts_checked": checked, "texts_differing": differing, "first_differences": differences, **digests}


def parse_kit_measurement(data: dict, where: str) -> list[dict]:
    """One row per program (or function of a multifunction package) the kit measured: warm samples summarised
    with the bench's own median rule; each row carries the device's tokenizer check."""
    schema = data.get(KIT_SCHEMA_KEY)
    if schema not in KIT_SCHEMAS_READ:
        raise ConfigError(f"{where}: kit schema {schema!r}; this version reads "
                          f"{', '.join(map(str, KIT_SCHEMAS_READ))}: rebuild the kit with `pocketbert bench kit "
                          "--overwrite`")
    tokenizer = data.get("tokenizer_check")
    if tokenizer is None and schema >= 3:
        raise ConfigError(f"{where}: no tokenizer_check; the kit runs the golden texts through the app's "
                          "tokenizer before it times anything: measure with the kit as `pocketbert bench kit` writes it")
    tokenizer = _tokenizer_check(tokenizer, where) if tokenizer is not None else None
    device = data.get("device")
    if not isinstance(device, str) or not device.strip():
        raise ConfigError(f"{where}: name the device in 'device' (for example \"iPhone 15 Pro\")")
    programs = data.get("programs")
    if not isinstance(programs, list) or not programs:
        raise ConfigError(f"{where}: 'programs' must list at least one measured program")
    rows = []
    for i, raw in enumerate(programs):
        here = f"{where}: programs[{i}]"
        program = _object(raw, here)
        runtime = program.get("runtime")
        if runtime not in KIT_RUNTIMES:
            raise ConfigError(f"{here}: runtime must be one of {', '.join(KIT_RUNTIMES)} (got {runtime!r})")
        lengths = [program.get(k) for k in ("batch", "sequence_length")]
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths):
            raise ConfigError(f"{here}: batch and sequence_length must be positive whole numbers")
        name = str(program.get("program") or "")
        function = _function(program, name, here)
        killed = _killed(program.get("killed"), here)
        if killed is not None:  # the process died: what it reached is all there is
            rows.append({"format": "kit", "program": name, "function": function, "runtime": runtime,
                         "model_format": KIT_RUNTIMES[runtime], "precision": str(program.get("precision") or ""),
                         "batch": lengths[0], "sequence_length": lengths[1], "device_name": device.strip(),
                         "os": data.get("os"), "compute_units": _compute_units(program.get("compute_units"), here),
                         "killed": killed, "tokenizer_check": tokenizer})
            continue
        samples = program.get("warm_samples_ms")
        if not isinstance(samples, list) or not samples:
            raise ConfigError(f"{here}: warm_samples_ms must be a non-empty list of milliseconds")
        stats = summarize([_positive(s, f"{here}: warm_samples_ms") for s in samples],
                          str(program.get("stop_reason") or "kit")).to_dict()
        lengths = [program.get(k) for k in ("batch", "sequence_length")]
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths):
            raise ConfigError(f"{here}: batch and sequence_length must be positive whole numbers")
        sha256 = _program_sha256(program.get("sha256"), here)
        if sha256 is None:
            raise ConfigError(f"{here}: no sha256 of the program measured; measure with a kit this version writes "
                              "(pocketbert bench kit --overwrite)")
        rows.append({**stats, "format": "kit", "program": name, "function": function,
                     "program_sha256": sha256,
                     "runtime": runtime, "model_format": KIT_RUNTIMES[runtime],
                     "precision": str(program.get("precision") or ""), "batch": lengths[0],
                     "sequence_length": lengths[1], "device_name": device.strip(), "os": data.get("os"),
                     "compute_units": _compute_units(program.get("compute_units"), here),
                     "cold_start": {"load_ms": _positive(program.get("load_ms"), f"{here}: load_ms"),
                                    "first_inference_ms": _positive(program.get("first_prediction_ms"),
                                                                    f"{here}: first_prediction_ms")},
                     "measured_placement": _kit_placement(program.get("placement"), here),
                     **_app_stages(program, here), "tokenizer_check": tokenizer})
    return rows


def import_phone_rows(path: Path, device_key: str, model: str, precision: str, batch: int,
                      sequence_length: int | None) -> list[dict]:
    """The rows one file brings: one for an Xcode or coremltools file, one per program for the kit's JSON (its
    own precision, runtime, shape and compute units win over the command line's, so it needs no sequence_length;
    the other files do: None refuses them)."""
    data = read_measurement(path)
    if KIT_SCHEMA_KEY not in data:
        if sequence_length is None:
            raise ConfigError(f"{Path(path).name} does not say the sequence length it measured: give "
                              "--sequence-length (the run has no bench results to take it from)")
        return [import_phone_file(path, device_key, model, precision, batch, sequence_length, data)]
    return [{"model": model, "threads": None, "tokenization": "excluded", "sweep": "headline", "device": device_key,
             "source": f"imported from {Path(path).name} (kit)", **{k: v for k, v in row.items() if k != "format"}}
            for row in parse_kit_measurement(data, str(path))]

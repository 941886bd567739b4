"""Device reports held against the published record: every published point predicted from the others
(leave-one-out) with its error printed, the estimate's range as that spread, latency as an app sees it (the
published idle and sustained factors; the kit's load, first prediction, p50/p90, after idle, sustained, killed and
tokenizer fields through `bench import` into the report), Android rows per SoC class, and each Apple program's
regions, boundaries and added cost in the report."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from pocketbert.mobile_bench.estimates import calibration, derive, profiles
from pocketbert.mobile_bench.reports.calibration_report import render_calibration
from pocketbert.mobile_bench.reports.report import build_document, render_markdown
from pocketbert.mobile_bench.steps.run import import_phone_measurement
from pocketbert.core.errors import ConfigError
from pocketbert.core.run.run_files import BENCH_DIR, BENCH_REPORT, BENCH_RESULTS
from tests.mobile_bench.test_calibration_and_kit import _run_with_export
from tests.mobile_bench.test_report import synthetic_results

APP_FIXTURE = Path(__file__).parent / "fixtures" / "kit_measurement_app.json"
MIN_POINTS = 12            # published points in calibration.yaml
MIN_MOBILE_ANE_POINTS = 3  # of them on an iPhone's or iPad's Neural Engine
SOC_CLASSES = ("flagship-npu", "mid-tier-cpu-fallback", "cpu")


def rows() -> list[dict]:
    return calibration.calibration_table(profiles.load_profiles()["devices"])["points"]


def test_the_table_holds_the_published_points_and_each_is_predicted_from_the_others():
    points = {p["id"]: p for p in rows()}
    assert len(points) >= MIN_POINTS and all(p["source"].startswith("https://") for p in points.values())
    mobile_ane = [p for p in points.values() if p["compute_unit"] == "neural_engine"
                  and p["device"].startswith(("iphone", "ipad"))]
    assert len(mobile_ane) >= MIN_MOBILE_ANE_POINTS
    predicted = [p for p in points.values() if p["loo_error"] is not None]
    assert len(predicted) >= 6
    for p in predicted:
        assert p["id"] not in p["loo_points"] and p["loo_points"]
        # never a point of its own source on its own device
        assert all((points[o]["source"], points[o]["device"]) != (p["source"], p["device"]) for o in p["loo_points"])
        others = [points[o]["factor"] for o in p["loo_points"]]
        expected = p["floor_ms"] * math.prod(others) ** (1 / len(others))
        assert p["predicted_ms"] == pytest.approx(expected)
        assert p["loo_error"] == pytest.approx(expected / p["measured_ms"] - 1)
    # a point without a prediction says why
    assert all(p["loo_none_because"] for p in points.values() if p["loo_error"] is None)


def test_leave_one_out_uses_the_others_never_the_point_itself():
    table = rows()
    before = {p["id"]: p["predicted_ms"] for p in table}
    changed = copy.deepcopy(table)
    granite = next(p for p in changed if p["id"] == "granite97m-coreai-ane-mac")
    granite["measured_ms"] *= 2
    granite["factor"] *= 2
    calibration.leave_one_out(changed)
    after = {p["id"]: p["predicted_ms"] for p in changed}
    assert after["granite97m-coreai-ane-mac"] == pytest.approx(before["granite97m-coreai-ane-mac"])
    assert after["apple-distilbert-ane-iphone13"] > before["apple-distilbert-ane-iphone13"]


def test_apple_misses_are_named_and_the_command_prints_each_error():
    text, table = render_calibration()
    misses = set(table["apple_misses"])
    for p in table["points"]:
        if p["family"] == "apple" and p["loo_error"] is not None:
            assert (abs(p["loo_error"]) > calibration.APPLE_TARGET) == (p["id"] in misses)
        line = next(row for row in text.splitlines() if row.startswith(f"| {p['id']} |"))
        assert (f"{100 * p['loo_error']:+.0f} %" if p["loo_error"] is not None else p["loo_none_because"]) in line
    assert text.rstrip().splitlines()[-1].startswith("Apple points beyond ±30 % leave-one-out:")


def test_the_estimates_range_is_the_leave_one_out_spread():
    table = calibration.calibration_table(profiles.load_profiles()["devices"])
    factor = next(f for f in table["factors"] if (f["family"], f["compute_unit"]) == ("apple", "neural_engine"))
    members = [p for p in table["points"] if p["id"] in factor["ids"]]
    ratios = [p["measured_ms"] / p["predicted_ms"] for p in members]
    got = calibration.calibrate(10.0, "apple", "neural_engine", "fp16", table["factors"])
    assert got["calibrated_low_ms"] == pytest.approx(10.0 * factor["factor"] * min(ratios))
    assert got["calibrated_high_ms"] == pytest.approx(10.0 * factor["factor"] * max(ratios))
    # a key whose only point no other can predict: an estimate, no range
    single = calibration.calibrate(10.0, "android-arm", "cpu", "fp32", table["factors"])
    assert single["calibrated_ms"] is not None and single["calibrated_low_ms"] is None


def test_estimated_rows_carry_the_published_idle_and_sustained_factors():
    results = derive.derive(synthetic_results())
    regimes = results["calibration"]["regimes"]
    stages = results["app_latency"]["estimated"]
    ane = next(r for r in stages if r["device"] == "iphone-13" and r["compute_unit"] == "neural_engine")
    assert ane["after_idle_ms"] == pytest.approx(ane["steady_ms"] + regimes["cold_after_idle"]["added_ms"])
    assert ane["sustained_ms"] == pytest.approx(ane["steady_ms"] * 4.75 / 1.85)
    assert "2606.22283" in ane["after_idle_source"] and "granite" in ane["sustained_source"]
    cpu = next(r for r in stages if r["device"] == "iphone-13" and r["compute_unit"] == "cpu")
    assert cpu["after_idle_ms"] is None and cpu["sustained_ms"] is None  # no source prices them
    md = render_markdown(build_document(results, {}))
    assert "Latency as an app sees it — estimated for phones" in md and "(> 5 s idle)" in md


def test_android_rows_split_by_soc_class_each_with_its_source():
    results = derive.derive(synthetic_results())
    android = results["app_latency"]["android"]
    assert {r["soc_class"] for r in android} == set(SOC_CLASSES)
    assert all(r["source"].startswith("https://") for r in android)
    fallback = next(r for r in android if r["soc_class"] == "mid-tier-cpu-fallback")
    npu = next(r for r in android if r["id"] == "qualcomm-distilbert-galaxy-s25-npu-w8a16")
    # the same model scaled by the same FLOP ratio: the classes keep their published order of magnitude
    assert fallback["student_scaled_ms"] / npu["student_scaled_ms"] == pytest.approx(703 / 4.11)
    md = render_markdown(build_document(results, {}))
    for name in ("flagship NPU", "mid-tier, CPU fallback", "CPU (TFLite/XNNPACK)"):
        assert f"| {name}" in md


@pytest.mark.slow
def test_kit_app_stages_round_trip_through_bench_import_into_the_report(tmp_path):
    run = _run_with_export(tmp_path)
    (run / BENCH_DIR).mkdir()
    (run / BENCH_DIR / BENCH_RESULTS).write_text(json.dumps(derive.derive(synthetic_results())))
    import_phone_measurement(run, APP_FIXTURE, "iphone-15-pro", "student", "fp16", 1, None)
    after = json.loads((run / BENCH_DIR / BENCH_RESULTS).read_text())
    row = next(m for m in after["measurements"] if m["device"] == "iphone-15-pro")
    assert row["cold_start"] == {"load_ms": 241.0, "first_inference_ms": 11.2}
    assert row["median_ms"] == pytest.approx(1.905) and row["p90_ms"] > row["median_ms"]
    assert row["after_idle"] == {"idle_s": 6.0, "first_call_ms": 262.5}
    assert row["sustained"]["calls"] == 1200 and row["sustained"]["p50_ms"] == pytest.approx(4.73)
    assert row["tokenizer_ms"] == pytest.approx(0.070)
    (killed,) = after["killed"]
    assert killed["killed"]["stage"] == "first_prediction" and killed["program"] == "PocketBertSentiment.aimodel"
    md = (run / BENCH_DIR / BENCH_REPORT).read_text()
    assert "262.5 (6 s idle)" in md
    assert "(1200 calls)" in md and "killed at first prediction: the Neural Engine compile failed" in md


@pytest.mark.parametrize("change, words", [
    (lambda p: p["after_idle"].update(idle_s=2.0), "at least 5 s"),
    (lambda p: p["sustained"].update(calls=500), "at least 1000"),
    (lambda p: p.update(killed={"stage": "compile"}), "killed.stage"),
])
def test_kit_app_stages_that_do_not_measure_what_they_say_are_refused(tmp_path, change, words):
    data = json.loads(APP_FIXTURE.read_text())
    change(data["programs"][0])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=words):
        import_phone_measurement(_run_with_export(tmp_path), bad, "iphone-15-pro", "student", "fp16", 1, 128)


def test_each_apple_program_shows_its_unit_regions_boundaries_and_added_cost():
    results = synthetic_results()
    results["placement"] = {"student_program": "S.aimodel", "verdicts": {"S.aimodel": {
        "program": "S.aimodel", "predicted_unit": "neural_engine", "neural_engine_op_share": 0.9,
        "neural_engine_flop_share": 0.99, "rules_fired": ["fp32-in-fp16"], "regions": 6, "boundaries": 5,
        "added_cost_ms": [4.15, 9.9], "axis_limit": "largest lookup table 8,000 rows: a fitted vocabulary clears "
        "the axis limit", "risks": ["kills the process at its first prediction (apple/coremltools#2758)"]}}}
    md = render_markdown(build_document(derive.derive(results), {}))
    assert "| S.aimodel | neural engine | " in md and "| 6 | 5 | 4.15–9.90 |" in md
    assert "a fitted vocabulary clears the axis limit" in md and "apple/coremltools#2758" in md


def test_the_kit_measures_the_app_stages_bench_import_reads(tmp_path, export_tokenizer_files):
    import re

    from pocketbert.mobile_bench.device.kit import CONFIG_PATH, KIT_FILES, write_kit
    from pocketbert.mobile_bench.device.phone_import import IDLE_MIN_S, KILLED_STAGES, SUSTAINED_MIN_CALLS

    folder = write_kit(_run_with_export(tmp_path, export_tokenizer_files))
    config = json.loads((folder / CONFIG_PATH).read_text())
    assert config["idle_s"] > IDLE_MIN_S and config["sustained_calls"] >= SUSTAINED_MIN_CALLS
    assert 0 < config["sustained_window"] <= config["sustained_calls"]
    swift = (folder / KIT_FILES["KitCore.swift.txt"]).read_text()
    for key in ('"after_idle"', '"first_call_ms"', '"sustained"', '"samples_ms"', '"killed"'):
        assert key in swift
    assert set(re.findall(r'mark\(planned, units, "(\w+)"\)', swift)) == set(KILLED_STAGES)


TINY_STUDENT = (0.05, 2.0, 0.6)  # GFLOPs, fp32 and int8 MB: a student whose calibrated figures fall below it


def test_no_neural_engine_estimate_beats_the_published_per_call_floor():
    from tests.mobile_bench.test_report import cost

    results = synthetic_results()
    results["graph_costs"]["headline"]["student"] = cost(*TINY_STUDENT)
    derive.derive(results)
    floor = results["calibration"]["regimes"]["call_floor"]["ms"]
    stages = results["app_latency"]["estimated"]
    ane = [r for r in stages if r["compute_unit"] == "neural_engine"]
    assert ane and all(r["steady_ms"] >= floor for r in ane)
    assert any(r["steady_is"] == "the per-call floor" for r in ane)
    # other units have no published per-call floor: their figures stay as calibrated
    assert any(r["steady_ms"] < floor for r in stages if r["compute_unit"] != "neural_engine")


def _manifest_with(passed: dict[str, bool]):
    from pocketbert.core.run.stage_records import ExportRecord

    files = {name: f"PocketBertSentiment.{name}.mlpackage" for name in passed}
    return ExportRecord.model_validate({
        "stage": "export",
        "config": {"task": "sentiment", "max_length": 128, "variants": {
            name: {"file": file, "runtime": "coreml", "precision": "fp16"} for name, file in files.items()}},
        "metrics": {"parity": {files[name]: {"artifact": files[name], "n_examples": 4, "agreement": 1.0, "passed": ok}
                               for name, ok in passed.items()}}})


def test_the_phone_rows_stand_for_the_program_the_ios_folder_ships():
    from pocketbert.mobile_bench.steps.run import shipped_apple_program

    assert shipped_apple_program(_manifest_with({"fp16": True, "ane": True})) == "PocketBertSentiment.ane.mlpackage"
    assert shipped_apple_program(_manifest_with({"fp16": True, "ane": False})) == "PocketBertSentiment.fp16.mlpackage"
    assert shipped_apple_program(_manifest_with({"6bit": True})) is None


def test_each_estimated_phone_row_names_the_students_program():
    results = synthetic_results()
    results["placement"] = {"student_program": "S.ane.mlpackage", "verdicts": {"S.ane.mlpackage": {
        "program": "S.ane.mlpackage", "predicted_unit": "neural_engine", "neural_engine_op_share": 1.0,
        "neural_engine_flop_share": 1.0, "rules_fired": []}}}
    derived = derive.derive(results)
    assert derived["estimated_comparisons"]
    assert all(c["student_program"] == "S.ane.mlpackage" for c in derived["estimated_comparisons"])
    md = render_markdown(build_document(derived, {}))
    assert "| program (student) |" in md and "| S.ane.mlpackage | neural_engine |" in md

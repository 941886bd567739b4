"""`bench compare` flags regressions beyond noise only; phone measurements import into the results schema."""

from __future__ import annotations

import json

import pytest
from helpers import error_line, run_cli

from pocketbert.core.errors import ConfigError
from pocketbert.mobile_bench.reports.results_diff import compare_results, render_comparison
from pocketbert.mobile_bench.device.phone_import import import_phone_file


def row(model, median, half_width, threads=1, precision="fp32"):
    return {"device": "host", "model": model, "runtime": "onnxruntime", "model_format": "onnx",
            "precision": precision, "threads": threads, "compute_units": None, "batch": 1, "sequence_length": 128,
            "tokenization": "excluded", "median_ms": median, "ci_low_ms": median - half_width,
            "ci_high_ms": median + half_width}


def results(*rows, cpu="cpu A"):
    return {"host": {"cpu": cpu}, "measurements": list(rows)}


def no_interval(m: dict) -> dict:
    """The row as a phone import has it: a median without an interval (Xcode's performance report)."""
    return {**m, "ci_low_ms": None, "ci_high_ms": None}


def compared(capsys, tmp_path, before: dict, after: dict, *options):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(before))
    b.write_text(json.dumps(after))
    return run_cli(capsys, "bench", "compare", a, b, *options)


def refused(result, *words):
    assert result.exit_code == 2, (result.out, result.err)
    line = error_line(result)
    assert line.startswith("error: ") and all(w in line for w in words), line
    assert len([ln for ln in result.err.splitlines() if ln.strip()]) == 1 and "Traceback" not in result.err


def test_compare_flags_only_changes_beyond_noise():
    before = results(row("student", 10.0, 0.1), row("bert-base", 100.0, 1.0), row("teacher", 20.0, 3.0),
                     row("student", 5.0, 0.05, precision="int8"))
    after = results(row("student", 12.0, 0.1),  # 20 % slower, intervals apart: a regression
                    row("bert-base", 90.0, 1.0),  # 10 % faster, apart: an improvement
                    row("teacher", 22.0, 3.0),  # 10 % slower but the intervals overlap: noise
                    row("student", 5.05, 0.05, precision="int8"))  # 1 %: below the protocol's precision
    result = compare_results(before, after)
    verdicts = {(r["model"], r["precision"]): r["verdict"] for r in result["rows"]}
    assert verdicts == {("student", "fp32"): "regression", ("bert-base", "fp32"): "improvement",
                        ("teacher", "fp32"): "within noise", ("student", "int8"): "same"}
    assert result["regressions"] == 1 and result["improvements"] == 1 and not result["different_host"]
    text = render_comparison(result)
    assert "+20.0 % | regression" in text and "1 regression(s)" in text


def test_compare_cli_exits_1_on_a_regression_and_0_without(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(results(row("student", 10.0, 0.1))))
    b.write_text(json.dumps(results(row("student", 10.05, 0.1), cpu="cpu B")))
    same = run_cli(capsys, "bench", "compare", a, b)
    assert same.exit_code == 0 and "0 regression(s)" in same.out and "different CPUs" in same.out
    b.write_text(json.dumps(results(row("student", 15.0, 0.1))))
    worse = run_cli(capsys, "bench", "compare", a, b)
    assert worse.exit_code == 1 and "regression" in worse.out
    missing = run_cli(capsys, "bench", "compare", a, tmp_path / "nope.json")
    assert missing.exit_code == 2 and "does not exist" in error_line(missing)


def test_coremltools_benchmark_json_imports_with_its_statistics(tmp_path):
    path = tmp_path / "bench.json"
    samples = [4.0, 4.1, 3.9, 4.0, 4.05, 3.95, 4.0, 4.02]
    path.write_text(json.dumps({"device": "iPhone 15 Pro", "os": "iOS 18.1", "compute_units": "ComputeUnit.ALL",
                                "predict": {"statistics": {"median": 4.0}, "samples": samples},
                                "load": {"samples": [120.0, 100.0, 110.0]}}))
    m = import_phone_file(path, "iphone-15-pro", "student", "fp16", 1, 128)
    assert m["device"] == "iphone-15-pro" and m["device_name"] == "iPhone 15 Pro" and m["compute_units"] == "ALL"
    assert m["median_ms"] == pytest.approx(4.0) and m["ci_low_ms"] <= 4.0 <= m["ci_high_ms"]
    assert m["cold_start"] == {"load_ms": 110.0} and m["repeats"] == len(samples)
    assert m["runtime"] == "coreml" and m["sequence_length"] == 128 and "coremltools" in m["source"]


def test_xcode_report_imports_its_median(tmp_path):
    path = tmp_path / "xcode.json"
    path.write_text(json.dumps({"xcode_performance_report": {
        "device": "iPhone 13", "os": "iOS 17.5", "compute_units": "CPU and Neural Engine",
        "prediction_median_ms": 2.7, "load_median_ms": 35.0}}))
    m = import_phone_file(path, "iphone-13", "student", "fp16", 1, 128)
    assert m["median_ms"] == 2.7 and m["compute_units"] == "CPU_AND_NE" and m["ci_low_ms"] is None
    assert m["cold_start"] == {"load_ms": 35.0}


SLOWDOWN_3X = 3.0


def test_a_slowdown_without_an_interval_is_a_regression_not_a_pass(tmp_path, capsys):
    """A 3x slowdown of a phone import (no interval) used to read "slower (no interval)" and exit 0."""
    before = results(no_interval(row("student", 4.0, 0)))
    after = results(no_interval(row("student", 4.0 * SLOWDOWN_3X, 0)))
    result = compared(capsys, tmp_path, before, after)
    assert result.exit_code == 1, result.out
    assert "regression (no interval)" in result.out and "1 regression(s)" in result.out and "10 %" in result.out


@pytest.mark.parametrize("slower_by, threshold, code", [(0.07, None, 0), (0.07, "5", 1), (0.12, None, 1),
                                                        (0.12, "15", 0), (-0.5, None, 0)])
def test_without_an_interval_the_threshold_decides(tmp_path, capsys, slower_by, threshold, code):
    before = results(no_interval(row("student", 10.0, 0)))
    after = results(row("student", 10.0 * (1 + slower_by), 0.01))  # an interval on one side only: none to compare
    result = compared(capsys, tmp_path, before, after, *(["--threshold", threshold] if threshold else []))
    assert result.exit_code == code, result.out


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "ten"])
def test_a_threshold_that_cannot_work_is_refused(tmp_path, capsys, value):
    one = results(row("student", 10.0, 0.1))
    refused(compared(capsys, tmp_path, one, one, "--threshold", value), "--threshold")


@pytest.mark.parametrize("before, after, words", [
    (results(), results(row("student", 10.0, 0.1)), ["a.json", "no measurements"]),
    (results(row("student", 10.0, 0.1)), results(), ["b.json", "no measurements"]),
    (results(row("student", 10.0, 0.1)), results(row("teacher", 10.0, 0.1)), ["no measurement in common"]),
    (results(row("student", 10.0, 0.1), row("teacher", 20.0, 0.1), row("student", 30.0, 0.1)),
     results(row("student", 10.0, 0.1)), ["a.json", "measurements[0] and measurements[2]", "model student"]),
    (results(row("student", 10.0, 0.1)), results(row("student", 10.0, 0.1), row("student", 50.0, 0.1)),
     ["b.json", "measurements[0] and measurements[1]"]),
    (results(row("student", 10.0, 0.1), row("student", 5.0, 0.1, precision="int8")),
     results(row("student", 10.0, 0.1)), ["1 measurement(s) of", "precision int8", "--allow-missing"]),
])
def test_what_cannot_be_compared_is_exit_2_not_a_pass(tmp_path, capsys, before, after, words):
    """Each of these used to print "0 regression(s)" and exit 0 (a duplicate row silently kept the last)."""
    refused(compared(capsys, tmp_path, before, after), *words)


def test_allow_missing_compares_the_rest(tmp_path, capsys):
    before = results(row("student", 10.0, 0.1), row("student", 5.0, 0.1, precision="int8"))
    same = compared(capsys, tmp_path, before, results(row("student", 10.0, 0.1)), "--allow-missing")
    assert same.exit_code == 0 and "1 measurement(s) only in the first file (not compared)" in same.out
    worse = compared(capsys, tmp_path, before, results(row("student", 15.0, 0.1)), "--allow-missing")
    assert worse.exit_code == 1


@pytest.mark.parametrize("payload, message", [
    ("not json", "is not valid JSON"),
    (json.dumps({"something": 1}), "not a phone measurement"),
    (json.dumps({"xcode_performance_report": {"device": "iPhone 13", "compute_units": "All",
                                              "prediction_median_ms": -3}}), "must be positive"),
    (json.dumps({"xcode_performance_report": {"device": "iPhone 13", "compute_units": "GPU please",
                                              "prediction_median_ms": 3}}), "compute_units must be one of"),
    (json.dumps({"predict": {"samples": [1.0]}, "compute_units": "ALL"}), "name the phone"),
])
def test_bad_phone_files_are_refused_with_a_reason(tmp_path, payload, message):
    path = tmp_path / "m.json"
    path.write_text(payload)
    with pytest.raises(ConfigError, match=message):
        import_phone_file(path, "iphone-13", "student", "fp16", 1, 128)


def test_two_programs_the_kit_measured_at_one_setting_are_compared_apart():
    def kit_row(program, median):
        return {**no_interval(row("student", median, 0.0)), "device": "iphone-15-pro", "runtime": "coreml",
                "model_format": "mlpackage", "precision": "fp16", "threads": None, "compute_units": "ALL",
                "program": program}

    plain, function = "PocketBertSentiment.mlpackage", "PocketBertSentiment.ane.mlpackage#main_len128"
    result = compare_results(results(kit_row(plain, 2.0), kit_row(function, 1.4)),
                             results(kit_row(plain, 2.0), kit_row(function, 2.8)))
    verdicts = {r["program"]: r["verdict"] for r in result["rows"]}
    assert verdicts == {plain: "within threshold (no interval)", function: "regression (no interval)"}

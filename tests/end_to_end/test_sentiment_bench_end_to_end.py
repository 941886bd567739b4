"""`pocketbert bench` end to end on the session's exported tiny run: results.json and the report, every comparison
against the reference read from the measurements it names. The reference is the tiny reference checkpoint
(`--reference`), exported and timed as BERT-base is; BERT-base's own shape is test_reference.py's."""

from __future__ import annotations

import json
import math

import pytest
from helpers import linked_copy, run_cli


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sentiment_run(tmp_path_factory, exported_run):
    """The session's exported tiny run, linked into a folder of this module's own: bench writes beside it."""
    return linked_copy(exported_run, tmp_path_factory.mktemp("runs") / "tiny")



MIN_SIZE_RATIO = 1  # the reference's fp32 ONNX file (a layer deeper) over the tiny student's: sizes, not timings
COMPARISON_FIELDS = {"kind", "baseline", "device", "runtime", "model_format", "precision", "threads", "student_ms",
                     "baseline_ms", "latency_ratio", "percent_faster", "size_ratio"}


def check_comparisons(results: dict) -> dict:
    """Every measured comparison in results.json has its fields, finite and positive, its times are the medians of
    the measurements it names, its ratios follow from them and from the models' file sizes. Returns the headline
    row (fp32 ONNX on onnxruntime against BERT-base, fewest threads), which must exist."""
    protocol = results["protocol"]
    rows = [m for m in results["measurements"] if m["batch"] == protocol["batch_size"]
            and m["sequence_length"] == protocol["sequence_length"] and m.get("tokenization") == "excluded"]
    assert all(math.isfinite(m["median_ms"]) and m["median_ms"] > 0 for m in results["measurements"])

    def medians(model, c):
        found = [m["median_ms"] for m in rows if m["model"] == model and m.get("device", "host") == c["device"]
                 and (m["runtime"], m["model_format"], m["precision"], m.get("threads"), m.get("compute_units")) ==
                 (c["runtime"], c["model_format"], c["precision"], c["threads"], c.get("compute_units"))]
        assert found, (model, c)
        return found  # a sweep may time the headline shape again: the comparison takes one of them

    def size(model, c):
        entry = results["models"][model].get("files", {}).get(f"{c['model_format']}-{c['precision']}")
        return entry and entry["size_bytes"]

    measured = [c for c in results["comparisons"] if c["kind"] == "measured"]
    assert measured and all(c["kind"] in ("measured", "estimated") for c in results["comparisons"])
    for c in measured:
        assert COMPARISON_FIELDS <= set(c), COMPARISON_FIELDS - set(c)
        numbers = [c["student_ms"], c["baseline_ms"], c["latency_ratio"], c["percent_faster"]]
        assert all(isinstance(x, (int, float)) and math.isfinite(x) for x in numbers), c
        assert c["student_ms"] > 0 and c["baseline_ms"] > 0 and c["latency_ratio"] > 0
        assert c["student_ms"] in medians("student", c) and c["baseline_ms"] in medians(c["baseline"], c)
        assert c["latency_ratio"] == pytest.approx(c["student_ms"] / c["baseline_ms"])
        assert c["percent_faster"] == pytest.approx(100.0 * (1.0 / c["latency_ratio"] - 1.0))
        sizes = size("student", c), size(c["baseline"], c)
        if all(sizes):
            assert math.isfinite(c["size_ratio"]) and c["size_ratio"] == pytest.approx(sizes[1] / sizes[0])
        else:
            assert c["size_ratio"] is None
    candidates = [c for c in measured if (c["baseline"], c["device"], c["runtime"], c["model_format"],
                                          c["precision"]) == ("bert-base", "host", "onnxruntime", "onnx", "fp32")]
    assert candidates, "no fp32 ONNX comparison of the student with BERT-base"
    return min(candidates, key=lambda c: c["threads"])


def test_bench_writes_results_and_report(sentiment_run, capsys, tmp_path, tiny_reference):
    result = run_cli(capsys, "bench", "--run", sentiment_run, "--reference", tiny_reference)
    assert result.exit_code == 0, result.err
    bench_dir = sentiment_run / "bench"
    results = json.loads((bench_dir / "results.json").read_text())
    headline = {(m["model"], m["runtime"], m["model_format"]) for m in results["measurements"]
                if m["sweep"] == "headline"}
    assert {("student", "onnxruntime", "onnx"), ("student", "onnxruntime", "ort"), ("student", "pytorch", "pytorch"),
            ("bert-base", "onnxruntime", "onnx"), ("teacher", "onnxruntime", "onnx"), ("student", "executorch", "pte"),
            ("bert-base", "executorch", "pte")} <= headline
    # ExecuTorch beside ONNX Runtime: the student against BERT-base, fp32 and int8, same runtime and setting
    executorch = {(c["precision"], c["threads"]) for c in results["comparisons"]
                  if c["runtime"] == "executorch" and c["baseline"] == "bert-base"}
    assert executorch == {(p, t) for p in ("fp32", "int8") for t in results["protocol"]["threads"]}
    assert any(c["runtime"] == "executorch" for c in results["cold_start"])
    # the reference's shape as its own config says, not BERT-base's
    assert results["models"]["bert-base"]["num_hidden_layers"] == 3 and str(tiny_reference) in \
        results["models"]["bert-base"]["description"]
    assert all(m["repeats"] >= 3 and m["ci_low_ms"] <= m["median_ms"] <= m["ci_high_ms"]
               for m in results["measurements"])
    assert {m["sequence_length"] for m in results["measurements"] if m["sweep"] == "sequence"} == {16}
    assert {m["tokenization"] for m in results["measurements"]} == {"excluded", "only", "excluded (same texts)",
                                                                     "included"}
    assert results["cold_start"] and all(c["load_ms"] > 0 for c in results["cold_start"])
    coreml = [r for r in results["runners"] if r["runtime"] == "coreml"]
    assert len(coreml) == 4 and all(not r["available"] and "macOS" in r["reason"] for r in coreml)
    coreai = [r for r in results["runners"] if r["runtime"] == "coreai"]
    assert len(coreai) == 3 and all(not r["available"] and "macOS 27" in r["reason"] for r in coreai)
    variant = {v["artifact"]: v for v in results["variants"]}["PocketBertSentiment.aimodel"]
    assert variant["model_format"] == "aimodel" and variant["size_bytes"] > 0 and variant["metric"] is not None
    # No timing is asserted (a loaded machine may time anything): what was written must be whole and consistent.
    headline = check_comparisons(results)
    assert headline["size_ratio"] > MIN_SIZE_RATIO
    assert results["estimated_comparisons"] and results["estimates"]["host"]
    assert results["graph_costs"]["headline"]["student"]["flops"] > 0
    report = (bench_dir / "report.md").read_text()
    assert (f"The student is {headline['percent_faster']:.0f} % faster and {headline['size_ratio']:.1f}× smaller "
            "than BERT-base and keeps") in report
    assert (bench_dir / "report.html").read_text().count("data:image/png;base64,") >= 4

    # a phone measurement joins the report without measuring again
    phone = tmp_path / "iphone.json"
    phone.write_text(json.dumps({"xcode_performance_report": {
        "device": "iPhone 15 Pro", "os": "iOS 18.1", "compute_units": "All", "prediction_median_ms": 1.9,
        "load_median_ms": 40.0}}))
    imported = run_cli(capsys, "bench", "import", phone, "--run", sentiment_run, "--device", "iphone-15-pro")
    assert imported.exit_code == 0, imported.err
    results = json.loads((bench_dir / "results.json").read_text())
    row = next(e for e in results["estimates"]["devices"] if e["device"] == "iphone-15-pro"
               and e["model"] == "student" and e["compute_unit"] == "neural_engine")
    assert row["measured_ms"] == 1.9 and row["measured_over_floor"] == pytest.approx(1.9 / row["floor_ms"])
    assert "iPhone 15 Pro" in (bench_dir / "report.md").read_text()

    # a results file compared with itself: every row "same", nothing flagged
    compared = run_cli(capsys, "bench", "compare", bench_dir / "results.json", bench_dir / "results.json")
    assert compared.exit_code == 0 and "0 regression(s)" in compared.out



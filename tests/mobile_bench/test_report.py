"""Latency statistics, the student/BERT-base comparison and the report rendered from results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pocketbert.mobile_bench.latency import summarize, synthetic_inputs
from pocketbert.mobile_bench.report import headline, headline_sentence, write_report
from pocketbert.mobile_bench.run import comparisons


def test_summarize():
    stats = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stats.median_ms == 3.0 and stats.min_ms == 1.0 and stats.mean_ms == 3.0
    assert stats.p90_ms == pytest.approx(4.6)
    with pytest.raises(ValueError):
        summarize([])


def test_synthetic_inputs_are_real_token_ids():
    inputs = synthetic_inputs(["input_ids", "attention_mask", "token_type_ids"], 1, 128, 30522)
    assert inputs["input_ids"].shape == (1, 128)
    assert inputs["input_ids"].min() >= 1000 and inputs["input_ids"].max() < 30522
    assert inputs["attention_mask"].all()
    assert set(np.unique(inputs["token_type_ids"])) == {0, 1}


def synthetic_results():
    measurements = [
        {"model": "student", "precision": "fp32", "threads": 1, "median_ms": 40.0, "p90_ms": 44.0},
        {"model": "bert-base", "precision": "fp32", "threads": 1, "median_ms": 150.0, "p90_ms": 160.0},
        {"model": "student", "precision": "int8", "threads": 1, "median_ms": 10.0, "p90_ms": 11.0},
        {"model": "bert-base", "precision": "int8", "threads": 1, "median_ms": 40.0, "p90_ms": 41.0},
    ]
    sizes = {"student": {"fp32": 70_000_000, "int8": 18_000_000}, "bert-base": {"fp32": 438_000_000, "int8": 110_000_000}}
    models = {name: {"description": name, "num_hidden_layers": 3, "hidden_size": 384, "num_attention_heads": 12,
                     "intermediate_size": 1536,
                     "files": {p: {"path": f"{p}.onnx", "size_bytes": s} for p, s in sizes[name].items()}}
              for name in sizes}
    return {
        "protocol": {"batch_size": 1, "sequence_length": 128, "threads": [1], "warmup": 1, "repeats": 3,
                     "inputs": "random ids"},
        "host": {"cpu": "Test CPU", "cores": 2, "os": "Linux", "isa_flags": ["avx2"]},
        "versions": {"onnxruntime": "1.31.1"},
        "models": models,
        "accuracy": {"metric": "accuracy", "eval_set": "sst2 eval (872 examples)", "student": 0.88, "teacher": 0.90,
                     "fraction_of_teacher_kept": 0.88 / 0.90,
                     "exported": {"model.onnx": {"value": 0.88, "agreement_with_student": 1.0, "n_examples": 872,
                                                 "runtime": "onnxruntime"}}},
        "measurements": measurements,
        "comparisons": comparisons(measurements, sizes),
    }


def test_comparisons_arithmetic():
    rows = {r["precision"]: r for r in synthetic_results()["comparisons"]}
    assert rows["fp32"]["latency_ratio"] == pytest.approx(40 / 150)
    assert rows["fp32"]["percent_faster"] == pytest.approx(275.0)
    assert rows["fp32"]["size_ratio"] == pytest.approx(438 / 70)
    assert rows["int8"]["percent_faster"] == pytest.approx(300.0)


def test_headline_uses_fp32_and_accuracy_kept():
    results = synthetic_results()
    h = headline(results)
    assert h["precision"] == "fp32" and h["percent_of_teacher_kept"] == pytest.approx(97.78, abs=0.01)
    sentence = headline_sentence(results)
    assert sentence.startswith("The student is 275 % faster and 6.3× smaller than BERT-base and keeps 97.8 %")


def test_report_renders_from_results_json(tmp_path):
    results_path = tmp_path / "results.json"
    results_path.write_text(json.dumps(synthetic_results()))
    write_report(results_path, tmp_path / "report.md", tmp_path / "latency.png")
    text = (tmp_path / "report.md").read_text()
    assert "275 % faster" in text and "| fp32 | 1 | 40.0 | 150.0 | 0.267 |" in text
    assert (tmp_path / "latency.png").stat().st_size > 10_000

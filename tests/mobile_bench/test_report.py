"""What the report states, derived from synthetic results: comparisons, estimates, checks, and both renderings."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pocketbert.mobile_bench.estimates import derive, profiles
from pocketbert.mobile_bench.timing.latency import synthetic_inputs
from pocketbert.mobile_bench.reports.report import headline, headline_sentence, write_reports

HEADLINE = dict(batch=1, sequence_length=128)


def measurement(model, median, precision="fp32", threads=1, runtime="onnxruntime", fmt="onnx", **shape):
    return {"model": model, "runtime": runtime, "model_format": fmt, "precision": precision, "threads": threads,
            "compute_units": None, **HEADLINE, **shape, "tokenization": "excluded", "sweep": "headline",
            "device": "host", "source": "measured here", "median_ms": median, "ci_low_ms": median * 0.99,
            "ci_high_ms": median * 1.01, "ci_relative_half_width": 0.01, "p90_ms": median * 1.05,
            "mean_ms": median, "min_ms": median * 0.98, "repeats": 12, "converged": True,
            "stop_reason": "interval within target"}


def cost(gflops, fp32_mb, int8_mb=None):
    weights = {"fp32": fp32_mb * 1e6, **({"int8": int8_mb * 1e6} if int8_mb else {})}
    return {"flops": gflops * 1e9, "matmul_flops": gflops * 0.99e9, "io_bytes": 2048, "activation_bytes": 4e7,
            "weight_bytes": weights}


def synthetic_results() -> dict:
    data = profiles.load_profiles()
    models = {}
    for name, layers, hidden, sizes in (("student", 3, 384, {"onnx-fp32": 70e6, "onnx-int8": 23e6}),
                                        ("bert-base", 12, 768, {"onnx-fp32": 438e6, "onnx-int8": 195e6}),
                                        ("teacher", 6, 384, {"onnx-fp32": 91e6, "onnx-int8": 34e6}),
                                        ("half-depth", 6, 768, {"onnx-fp32": 268e6})):
        models[name] = {"description": name, "num_hidden_layers": layers, "hidden_size": hidden,
                        "num_attention_heads": 12, "intermediate_size": 4 * hidden,
                        "files": {k: {"path": f"{name}/{k}", "size_bytes": int(v)} for k, v in sizes.items()}}
    measurements = [measurement("student", 8.0), measurement("bert-base", 114.0), measurement("teacher", 16.0),
                    measurement("half-depth", 57.0), measurement("student", 5.0, "int8"),
                    measurement("bert-base", 69.0, "int8"), measurement("student", 2.0, sequence_length=32),
                    measurement("bert-base", 40.0, sequence_length=32)]
    headline_costs = {"student": cost(1.45, 69.6, 22.8), "bert-base": cost(22.45, 437.5, 194.7),
                      "teacher": cost(2.9, 90.9, 33.5), "half-depth": cost(11.23, 267.6)}
    return {
        "created": "2026-11-21T00:00:00", "git_commit": "abc", "wall_time_s": 1.0,
        "versions": {"onnxruntime": "1.31.1", "torch": "2.13.0"},
        "host": {"cpu": "Test CPU", "cores": 2, "os": "Linux", "machine": "x86_64", "isa_flags": ["avx2"]},
        "host_profile": {"name": "this host", "memory_bandwidth_gbs": {"value": 40.0, "source": ["measured"],
                                                                      "derivation": "copy"},
                         "compute": {"cpu": {"fp32": {"peak_gflops": 400.0, "per_thread_count": {"1": 200.0},
                                                      "source": ["measured"], "derivation": "matmul"}}}},
        "profiles": {k: profiles.resolve_sources(p, data["sources"]) for k, p in data["devices"].items()},
        "protocol": {"batch_size": 1, "sequence_length": 128, "threads": [1], "pytorch_threads": [1], "warmup": 3,
                     "min_repeats": 10, "max_repeats": 300, "time_cap_s": 4.0, "interval": "95 % interval",
                     "target_relative_half_width": 0.02, "sequence_sweep": [32, 128], "batch_sweep": [1],
                     "sweep_threads": 1, "cold_start_repeats": 3, "inputs": "random ids"},
        "models": models,
        "runners": [{"model": "student", "runner": "coreml mlpackage fp16, ALL", "runtime": "coreml",
                     "available": False, "reason": "Core ML predictions need macOS; this host runs Linux"}],
        "accuracy": {"metric": "accuracy", "eval_set": "sst2 eval (872 examples)", "student": 0.868, "teacher": 0.882,
                     "fraction_of_teacher_kept": 0.868 / 0.882,
                     "exported": {"model.onnx": {"value": 0.868, "agreement_with_student": 1.0, "n_examples": 872,
                                                 "runtime": "onnxruntime", "precision": "fp32", "model_format": "onnx",
                                                 "size_bytes": 70_000_000},
                                  "Model.mlpackage": {"value": 0.89, "agreement_with_student": 1.0, "n_examples": 100,
                                                      "runtime": "MIL interpreter", "precision": "fp16",
                                                      "model_format": "mlpackage", "size_bytes": 35_000_000}}},
        "measurements": measurements,
        "cold_start": [{"model": "student", "runtime": "onnxruntime", "model_format": "onnx", "precision": "fp32",
                        "threads": 1, "compute_units": None, "repeats": 3, "load_ms": 30.0,
                        "first_inference_ms": 9.0, "total_ms": 39.0}],
        "architecture_pair": {"batch": 1, "sequence_length": 128, "runtime": "onnxruntime fp32, 1 thread",
                              "order": "interleaved", "half-depth": {"median_ms": 57.0}, "bert-base": {"median_ms": 114.0}},
        "graph_costs": {"headline": headline_costs,
                        "by_shape": {m: {"1x128": c} for m, c in headline_costs.items()}},
    }


def test_measured_comparisons_against_bert_base_and_teacher():
    results = derive.derive(synthetic_results())
    rows = {(c["baseline"], c["precision"]): c for c in results["comparisons"]}
    bert = rows[("bert-base", "fp32")]
    assert bert["latency_ratio"] == pytest.approx(8 / 114) and bert["percent_faster"] == pytest.approx(1325.0)
    assert bert["size_ratio"] == pytest.approx(438 / 70)
    assert rows[("teacher", "fp32")]["percent_faster"] == pytest.approx(100.0)
    assert rows[("bert-base", "int8")]["size_ratio"] == pytest.approx(195 / 23)
    assert all(c["kind"] == "measured" for c in results["comparisons"])
    # sequence-32 rows are sweep points, not headline comparisons
    assert len([c for c in results["comparisons"] if c["baseline"] == "bert-base"]) == 2


def test_estimated_comparisons_cover_every_phone_and_unit():
    results = derive.derive(synthetic_results())
    est = results["estimated_comparisons"]
    assert {e["device"] for e in est} == set(profiles.load_profiles()["devices"])
    ane = next(e for e in est if e["device"] == "iphone-15-pro" and e["compute_unit"] == "neural_engine"
               and e["baseline"] == "bert-base")
    assert all(e["kind"] == "estimated" for e in est)
    floors = {e["model"]: e for e in results["estimates"]["devices"]
              if e["device"] == "iphone-15-pro" and e["compute_unit"] == "neural_engine"}
    assert ane["latency_ratio"] == pytest.approx(floors["student"]["floor_ms"] / floors["bert-base"]["floor_ms"])
    # BERT-base fp16 on a 51.2 GB/s phone: 219 MB of weights take at least 4.27 ms
    assert floors["bert-base"]["floor_ms"] == pytest.approx((437.5e6 / 2 + 2048) / 51.2e9 * 1e3)


def test_architecture_check_and_host_floors():
    results = derive.derive(synthetic_results())
    check = results["architecture_check"]
    assert check["latency_ratio"] == pytest.approx(57 / 114) and check["passes"]
    assert check["flop_ratio"] == pytest.approx(11.23 / 22.45)
    host = {(e["model"], e["precision"]): e for e in results["estimates"]["host"]}
    assert ("student", "int8") not in host  # an fp32 peak is no floor for int8 kernels
    assert host[("student", "fp32")]["floor_ms"] == pytest.approx(1.45e9 / 200e9 * 1e3)
    assert host[("student", "fp32")]["measured_over_floor"] == pytest.approx(8.0 / 7.25)


def test_phone_measurement_sits_beside_its_floor():
    raw = synthetic_results()
    raw["measurements"].append({**measurement("student", 3.4, "fp16", threads=None, runtime="coreml",
                                              fmt="mlpackage"), "compute_units": "ALL", "device": "iphone-15-pro",
                                "source": "imported"})
    results = derive.derive(raw)
    row = next(e for e in results["estimates"]["devices"] if e["device"] == "iphone-15-pro"
               and e["model"] == "student" and e["compute_unit"] == "neural_engine")
    assert row["measured_ms"] == 3.4 and row["measured_over_floor"] == pytest.approx(3.4 / row["floor_ms"])


def test_headline_sentence():
    results = derive.derive(synthetic_results())
    assert headline(results)["percent_of_teacher_kept"] == pytest.approx(98.41, abs=0.01)
    assert headline_sentence(results).startswith(
        "The student is 1325 % faster and 6.3× smaller than BERT-base and keeps 98.4 % of its teacher's accuracy")


def test_a_fitted_vocabulary_reports_the_shipped_size_and_the_full_one():
    raw = synthetic_results()
    # the export measured the student's fp32 file with the full table (the synthetic files are named by key)
    raw["vocabulary"] = {"rows_before": 30522, "rows_after": 13285, "full_vocabulary_sizes_bytes": {"onnx-fp32": 140e6}}
    results = derive.derive(raw)
    rows = {(c["baseline"], c["precision"]): c for c in results["comparisons"]}
    bert = rows[("bert-base", "fp32")]
    assert bert["size_ratio"] == pytest.approx(438 / 70) and bert["size_ratio_full_vocabulary"] == pytest.approx(438 / 140)
    assert rows[("bert-base", "int8")]["size_ratio_full_vocabulary"] is None  # not measured for that file
    assert ("6.3× smaller (its vocabulary fitted to 13,285 of 30,522 rows; 3.1× with the full one) than BERT-base"
            in headline_sentence(results))
    assert derive.derive(synthetic_results())["comparisons"][0]["size_ratio_full_vocabulary"] is None


def test_a_qa_report_names_its_f1_and_stands_beside_distilberts_published_line(tmp_path):
    from pocketbert.mobile_bench.reports.published import published_line

    raw = synthetic_results()
    raw["accuracy"].update(metric="f1", student=61.2, teacher=68.0, fraction_of_teacher_kept=61.2 / 68.0,
                           eval_set="squad, 2,000 of dev-v1.1.json's 10,570 (the fixed sample, seed 2016)")
    raw["published"] = published_line("qa")
    results = derive.derive(raw)
    assert "keeps 90.0 % of its teacher's F1" in headline_sentence(results)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    md = write_reports(path, tmp_path)["markdown"].read_text()
    line = next(line for line in md.splitlines() if line.startswith("Published beside it: DistilBERT"))
    assert "71 % faster than BERT-base on an iPhone 7 Plus" in line and "f1 86.9 against BERT-base's 88.5" in line
    assert "98.2 % kept" in line and "arXiv:1910.01108" in line
    assert md.index("keeps 90.0 %") < md.index(line)


@pytest.mark.slow
def test_reports_render_from_results_json_alone(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(derive.derive(synthetic_results())))
    written = write_reports(path, tmp_path)
    md, page = written["markdown"].read_text(), written["html"].read_text()
    sentence = headline_sentence(json.loads(path.read_text()))
    assert sentence in md and sentence.replace("'", "&#x27;") in page
    for section in ("— measured", "— estimated for phones", "Architecture check", "Cold start", "Roofline estimates",
                    "Runners that cannot run here", "Device profiles and their sources"):
        assert section in md and section in page
    assert "Core ML predictions need macOS" in md
    assert "| iPhone 15 Pro | bert-base | – | neural_engine | fp16 |" in md  # no export: no program named
    # self-contained: every image inline, nothing fetched from elsewhere
    images = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r'(src|href)="https?://', page)
    assert (tmp_path / "latency.png").stat().st_size > 10_000 and (tmp_path / "roofline.png").is_file()
    # it reads like a decision: the headline, the student against BERT-base per runtime, a compact table, and only
    # then the full tables
    assert md.index(sentence) < md.index("## At a glance") < md.index("— measured")
    assert page.index("<img") < page.index("— measured")
    assert (tmp_path / "student_vs_bert_base.png").stat().st_size > 10_000


def test_synthetic_inputs_are_real_token_ids():
    inputs = synthetic_inputs(["input_ids", "attention_mask", "token_type_ids"], 1, 128, 30522)
    assert inputs["input_ids"].shape == (1, 128)
    assert inputs["input_ids"].min() >= 1000 and inputs["input_ids"].max() < 30522
    assert inputs["attention_mask"].all()
    assert set(np.unique(inputs["token_type_ids"])) == {0, 1}

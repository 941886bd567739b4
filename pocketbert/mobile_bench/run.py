"""`pocketbert bench`: time the exported student and BERT-base on ONNX Runtime; write results.json first."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tqdm.auto import tqdm

from pocketbert.errors import RunDirError
from pocketbert.export.onnx_export import ort_session
from pocketbert.manifest import git_commit, package_versions, path_size, read_manifest
from pocketbert.mobile_bench import host, latency, reference, report
from pocketbert.rundir import (
    BENCH_DIR,
    BENCH_PLOT,
    BENCH_REPORT,
    BENCH_RESULTS,
    EXPORT_DIR,
    LABELS,
    MODEL_CONFIG,
    ONNX_FP32,
    ONNX_INT8,
    STUDENT_DIR,
    check_writable,
    require_stage,
    staged_output,
)
from pocketbert.train.tasks import make_task

RESULTS_SCHEMA = 1


def _model_summary(config: dict) -> dict:
    return {k: config.get(k) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")}


def comparisons(measurements: list[dict], sizes: dict) -> list[dict]:
    """Student against BERT-base for each precision and thread count measured for both."""
    by_key = {(m["model"], m["precision"], m["threads"]): m for m in measurements}
    rows = []
    for (model, precision, threads), student in by_key.items():
        if model != "student" or ("bert-base", precision, threads) not in by_key:
            continue
        bert = by_key[("bert-base", precision, threads)]
        ratio = student["median_ms"] / bert["median_ms"]
        rows.append({
            "precision": precision, "threads": threads,
            "student_median_ms": student["median_ms"], "bert_base_median_ms": bert["median_ms"],
            "latency_ratio": ratio,
            "percent_faster": 100.0 * (bert["median_ms"] / student["median_ms"] - 1.0),
            "size_ratio": sizes["bert-base"][precision] / sizes["student"][precision],
        })
    return sorted(rows, key=lambda r: (r["precision"], r["threads"]))


def bench_run(run_dir: Path, overwrite: bool = False, reference_source: str | None = None,
              threads: list[int] | None = None, repeats: int | None = None) -> tuple[Path, dict]:
    started = time.time()
    check_writable(run_dir, BENCH_DIR, overwrite)
    export_dir = require_stage(run_dir, EXPORT_DIR, "pocketbert export")
    student_dir = require_stage(run_dir, STUDENT_DIR, "pocketbert train distill")
    student_manifest = read_manifest(student_dir)
    export_manifest = read_manifest(export_dir)
    recipe = student_manifest["config"]["recipe"]
    cfg = recipe.get("bench", {})
    threads = threads or list(cfg.get("threads", [1, 2]))
    repeats = repeats or int(cfg.get("repeats", 30))
    warmup = int(cfg.get("warmup", 5))
    seq_len, batch = int(cfg.get("sequence_length", 128)), int(cfg.get("batch_size", 1))
    student_config = json.loads((export_dir / MODEL_CONFIG).read_text())
    if seq_len > student_config.get("max_position_embeddings", seq_len):
        raise RunDirError(f"bench sequence length {seq_len} exceeds the student's positions: lower bench.sequence_length")
    labels = json.loads((export_dir / LABELS).read_text())
    task = make_task(export_manifest["config"]["task"], labels)

    with staged_output(run_dir, BENCH_DIR, overwrite) as out:
        ref_files, ref_describe = reference.reference_onnx(task, reference_source)
        files = {"student": {"fp32": export_dir / ONNX_FP32, "int8": export_dir / ONNX_INT8}, "bert-base": ref_files}
        sizes = {m: {p: path_size(f) for p, f in fs.items()} for m, fs in files.items()}
        inputs = latency.synthetic_inputs(list(task.input_names), batch, seq_len, student_config["vocab_size"])
        plan = [(m, p, t) for t in threads for p in ("fp32", "int8") for m in ("student", "bert-base")]
        measurements = []
        for model, precision, n_threads in tqdm(plan, desc="bench", unit="model"):
            session = ort_session(files[model][precision], threads=n_threads)
            stats = latency.time_session(session, inputs, warmup, repeats)
            measurements.append({"model": model, "precision": precision, "threads": n_threads, **stats.to_dict()})
        student_metrics = student_manifest["metrics"]
        primary = student_metrics["primary_metric"]
        parity = export_manifest["metrics"]["parity"]
        results = {
            "schema": RESULTS_SCHEMA,
            "kind": "measured",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "run": str(run_dir),
            "git_commit": git_commit(),
            "versions": package_versions(),
            "host": host.host_info(),
            "runtime": {"name": "onnxruntime", "provider": "CPUExecutionProvider"},
            "protocol": {"batch_size": batch, "sequence_length": seq_len, "threads": threads, "warmup": warmup,
                         "repeats": repeats, "inputs": "random in-vocabulary token ids, full attention"},
            "models": {
                "student": {"description": f"distilled student ({student_dir})", **_model_summary(student_config),
                            "parameters": student_metrics.get("parameters"),
                            "files": {p: {"path": str(f), "size_bytes": sizes["student"][p]} for p, f in files["student"].items()}},
                "bert-base": {"description": ref_describe, **_model_summary(reference.BERT_BASE_CONFIG),
                              "files": {p: {"path": str(f), "size_bytes": sizes["bert-base"][p]} for p, f in ref_files.items()}},
            },
            "accuracy": {
                "metric": primary,
                "eval_set": f"{student_manifest['config']['dataset']} eval ({student_metrics['eval']['n_examples']} examples)",
                "student": student_metrics["eval"][primary],
                "teacher": student_metrics["teacher_eval"][primary],
                "fraction_of_teacher_kept": student_metrics["fraction_of_teacher_kept"],
                "exported": {name: {"value": r["metrics"].get(primary), "agreement_with_student": r["agreement"],
                                    "n_examples": r["n_examples"], "runtime": r["runtime"]} for name, r in parity.items()},
            },
            "measurements": measurements,
            "comparisons": comparisons(measurements, sizes),
        }
        results["wall_time_s"] = round(time.time() - started, 1)
        (out / BENCH_RESULTS).write_text(json.dumps(results, indent=2) + "\n")
        report.write_report(out / BENCH_RESULTS, out / BENCH_REPORT, out / BENCH_PLOT)
    final = Path(run_dir) / BENCH_DIR
    return final, results

"""`pocketbert bench`: measure, count and estimate; write results.json first, then render the reports from it."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from pocketbert.core.students.stage_folder import read_labels
from pocketbert.core.errors import ConfigError, RunDirError
from pocketbert.core.files import dumps_strict, read_json_object
from pocketbert.export.programs import artifacts
from pocketbert.core.run.manifest import (
    git_commit,
    package_versions,
    path_size,
    read_manifest,
    sha256_of,
    verified_stage,
)
from pocketbert.core.run.stage_records import ExportRecord, StudentRecord, VariantEntry
from pocketbert.mobile_bench.estimates import derive, graph_cost, profiles
from pocketbert.mobile_bench.reports import published, report
from pocketbert.mobile_bench.timing import host, reference
from pocketbert.mobile_bench.timing.latency import synthetic_inputs
from pocketbert.mobile_bench.timing.runners import COREAI_COMPUTE_UNITS, COREML_COMPUTE_UNITS, Runner, cold_start
from pocketbert.mobile_bench.timing.stats import (
    TARGET_RELATIVE_HALF_WIDTH,
    measure_interleaved,
    measure_until_stable,
)
from pocketbert.mobile_bench.timing.tokenization import eval_texts, tokenizer_runner
from pocketbert.core.run.atomic_folder import check_writable, require_stage, staged_output, write_text_atomically
from pocketbert.core.run.run_files import (
    BENCH_DIR,
    BENCH_IMPORTS_DIR,
    BENCH_RESULTS,
    EXECUTORCH_FP32,
    EXECUTORCH_INT8,
    EXPORT_DIR,
    LABELS,
    MANIFEST,
    MODEL_CONFIG,
    ONNX_FP32,
    ONNX_INT8,
    STUDENT_DIR,
    TEACHER_DIR,
    TOKENIZER_FILES,
    TOKENIZER_GOLDEN,
    TOKENIZER_JSON,
    TOKENIZER_TABLES,
)
from pocketbert.core.tasks.registry import make_task

if TYPE_CHECKING:
    from pocketbert.core.config.recipe import BenchSection

RESULTS_SCHEMA = 2
MEASURED_HERE = "measured here"
FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")  # what an imported row's file name keeps of its program's name


def bench_config(recipe: dict, threads: list[int] | None, time_cap_s: float | None,
                 overrides: dict | None = None) -> BenchSection:
    """The recipe's bench section, validated and complete (core/config/recipe.py), with the command line's overrides
    (--set bench.KEY=VALUE, then --threads and --time-cap)."""
    from pocketbert.core.config.recipe import recorded_section, typed_section

    cfg = recorded_section(recipe, "bench", overrides, "--set")
    given = {k: v for k, v in (("threads", threads), ("time_cap_s", time_cap_s)) if v}
    # --threads and --time-cap held to the section's bounds too (no repeated count, a cap a bench can finish)
    return typed_section("bench", {**cfg.model_dump(), **given}, "--threads/--time-cap") if given else cfg


def _model_summary(config: dict) -> dict:
    return {k: config.get(k) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")}


PTE_FILES = {"fp32": EXECUTORCH_FP32, "int8": EXECUTORCH_INT8}  # BERT-base's ExecuTorch programs (reference.py)
# What bench times of an export, by the export's own variant names: the ONNX graphs, the .ort, the ExecuTorch
# programs and the fp16 Core ML program. The export manifest's variants table says which were made, their files,
# runtimes and precisions; bench spells no export file name of its own.
BENCHED_VARIANTS = ("onnx", "onnx-int8", "ort", "fp16", "pte", "pte-int8", "coreai-fp16")
REQUIRED_VARIANTS = ("onnx", "onnx-int8", "ort")  # every export makes them; bench's sweeps run the ONNX pair


def export_variants(manifest: ExportRecord) -> dict[str, VariantEntry]:
    """The export manifest's variants table (variant name -> file, runtime, precision), checked."""
    table = manifest.config.variants
    advice = "re-run `pocketbert export --overwrite` with this version"
    if not table:
        raise RunDirError(f"the export manifest records no variants table (config.variants): {advice}")
    for name, entry in table.items():
        if not (entry.file and entry.runtime and entry.precision) or Path(entry.file).name != entry.file:
            raise RunDirError(f"the export manifest's variant '{name}' needs a file name, a runtime and a precision: "
                              f"{advice}")
    missing = [name for name in REQUIRED_VARIANTS if name not in table]
    if missing:
        raise RunDirError(f"the export manifest records no {', '.join(missing)} variant: {advice}")
    return table


def variant_key(entry: VariantEntry) -> str:
    """How results.json names a model's file: its format and precision ('onnx-int8', 'ort-int8', 'mlpackage-fp16'),
    as the measurements of it say them."""
    return f"{_artifact_format(entry.file, entry.runtime)}-{entry.precision}"


def student_export_files(export_dir: Path, manifest: ExportRecord) -> dict[str, Path]:
    """The export files bench times, keyed as results.json keys them, from the manifest's variants table."""
    table = export_variants(manifest)
    return {variant_key(table[name]): Path(export_dir) / table[name].file
            for name in BENCHED_VARIANTS if name in table}


def _artifact_format(name: str, runtime: str = "") -> str:
    """The file format; a text-in model (its tokenizer inside, run with onnxruntime-extensions) is a format of its
    own, so that no token-id latency is credited to it."""
    fmt = Path(name).suffix.lstrip(".")  # onnx, ort, mlpackage, pte
    return fmt + "-text-in" if "extensions" in runtime else fmt


def _row(model: str, setting: dict, batch: int, length: int, sweep: str, stats: dict,
         tokenization: str = "excluded") -> dict:
    """One measurement as results.json records it: what ran, at which shape, and its statistics."""
    return {"model": model, **setting, "batch": batch, "sequence_length": length, "tokenization": tokenization,
            "sweep": sweep, "device": derive.HOST, "source": MEASURED_HERE, **stats}


class Bench:
    """Runs the measurement plan; every row carries its full setting so results can be compared later."""

    def __init__(self, task, cfg: BenchSection, vocab_size: int):
        self.task, self.cfg, self.vocab_size = task, cfg, vocab_size
        self.rows: dict[tuple, dict] = {}

    def inputs(self, batch: int, length: int) -> dict:
        return synthetic_inputs(list(self.task.input_names), batch, length, self.vocab_size)

    def measure(self, model: str, runner: Runner, batch: int, length: int, sweep: str) -> dict:
        key = (model, runner.runtime, runner.model_format, runner.precision, runner.threads, runner.compute_units,
               batch, length)
        if key in self.rows:
            return self.rows[key]
        inputs = self.inputs(batch, length)
        run = runner.load(self.task)
        stats = measure_until_stable(lambda: run(inputs), self.cfg.warmup, self.cfg.min_repeats,
                                     self.cfg.max_repeats, self.cfg.time_cap_s)
        self.rows[key] = _row(model, runner.setting(), batch, length, sweep, stats.to_dict())
        return self.rows[key]


def _runners(files: dict, threads: list[int], pytorch_threads: list[int],
             coreml_max_sequence: int | None, coreai_lengths: tuple[int, ...] = ()) -> list[tuple[str, Runner]]:
    """The headline plan: every model on every runtime and setting that applies to it."""
    plan = []
    for model, fs in files.items():
        for t in threads:
            for precision in ("fp32", "int8"):
                if f"onnx-{precision}" in fs:
                    plan.append((model, Runner("onnxruntime", "onnx", fs[f"onnx-{precision}"], precision, threads=t)))
            if "ort-int8" in fs:
                plan.append((model, Runner("onnxruntime", "ort", fs["ort-int8"], "int8", threads=t)))
            for precision in ("fp32", "int8"):
                if f"pte-{precision}" in fs:
                    plan.append((model, Runner("executorch", "pte", fs[f"pte-{precision}"], precision, threads=t)))
        if "pytorch-fp32" in fs:
            plan += [(model, Runner("pytorch", "pytorch", fs["pytorch-fp32"], "fp32", threads=t)) for t in pytorch_threads]
        if "mlpackage-fp16" in fs:
            plan += [(model, Runner("coreml", "mlpackage", fs["mlpackage-fp16"], "fp16", compute_units=cu,
                                    max_sequence=coreml_max_sequence)) for cu in COREML_COMPUTE_UNITS]
        if "aimodel-fp16" in fs:
            plan += [(model, Runner("coreai", "aimodel", fs["aimodel-fp16"], "fp16", compute_units=cu,
                                    lengths=coreai_lengths)) for cu in COREAI_COMPUTE_UNITS]
    return plan


def _with_pytorch(export_files: dict[str, Path], student_dir: Path) -> dict[str, Path]:
    """The student's files in results.json's order: the ONNX graphs and the .ort, the PyTorch folder, then Core ML
    and ExecuTorch where the export made them."""
    first = ("onnx-fp32", "onnx-int8", "ort-int8")
    return {**{k: export_files[k] for k in first if k in export_files}, "pytorch-fp32": student_dir,
            **{k: v for k, v in export_files.items() if k not in first}}


def shipped_apple_program(export_manifest: ExportRecord) -> str | None:
    """The Core ML program the iOS folder ships by default (export/app/app_folders.py): the first of
    IOS_APP_PROGRAMS the export made and gated, by its file name; None where it made none."""
    from pocketbert.core.config.export_families import IOS_APP_PROGRAMS

    parity = export_manifest.metrics.parity
    for name in IOS_APP_PROGRAMS:
        file = export_manifest.variant_file(name)
        if file in parity and parity[file].passed:
            return file
    return None


def student_placement(export_manifest: ExportRecord) -> dict:
    """The placement verdicts the export recorded, and which program the phone rows stand for: the one the iOS
    folder ships."""
    from pocketbert.mobile_bench.estimates.placement_verdict import verdicts_from_manifest

    return {"student_program": shipped_apple_program(export_manifest),
            "verdicts": verdicts_from_manifest(export_manifest)}


def shipped_vocabulary(export_manifest: ExportRecord) -> dict | None:
    """A fitted vocabulary's rows and each ONNX model's size had it kept the full one (the export measured both);
    None when the export ships the full vocabulary."""
    fitted = export_manifest.metrics.vocabulary
    if fitted is None:
        return None
    return {"rows_before": fitted.rows_before, "rows_after": fitted.rows_after,
            "full_vocabulary_sizes_bytes": fitted.full_vocabulary_sizes_bytes}


def _files_entry(fs: dict) -> dict:
    return {k: {"path": str(p), "size_bytes": path_size(p)} for k, p in fs.items()}


def _verify_export(run_dir: Path, export_dir: Path, manifest: ExportRecord) -> None:
    """Time only what the export's parity gate proved: every export file bench reads, checked against the hash
    the export manifest recorded, before anything is timed."""
    recorded = manifest.artifacts or {}
    optional = [n for n in TOKENIZER_FILES if n in recorded or os.path.lexists(export_dir / n)]
    names = [MODEL_CONFIG, LABELS, *(path.name for path in student_export_files(export_dir, manifest).values()),
             *optional]
    artifacts.verified(export_dir, manifest, names, run_dir)


def collect_imports(run_dir: Path) -> list[dict]:
    """The imported rows that measured something (a program the kit saw killed is kept apart: killed_imports)."""
    return [row for row in _imported(run_dir) if not row.get("killed")]


def killed_imports(run_dir: Path) -> list[dict]:
    """The imported programs whose process was killed on the device (the kit's 'killed' entries)."""
    return [row for row in _imported(run_dir) if row.get("killed")]


def _imported(run_dir: Path) -> list[dict]:
    folder = Path(run_dir) / BENCH_IMPORTS_DIR
    advice = "remove it, or bring the measurement in again with `pocketbert bench import`"
    return [read_json_object(p, RunDirError, advice, "imported measurement")
            for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def read_results(path: Path) -> dict:
    """A results.json written by `pocketbert bench`, checked for what is read back from it."""
    from pocketbert.mobile_bench.reports.results_diff import load_results

    results = load_results(path, RunDirError)
    length = (results.get("protocol") or {}).get("sequence_length") if isinstance(results.get("protocol"), dict) else None
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise RunDirError(f"{path}: no protocol.sequence_length; re-run `pocketbert bench --overwrite`")
    return results


def bench_run(run_dir: Path, overwrite: bool = False, reference_source: str | None = None,
              threads: list[int] | None = None, time_cap_s: float | None = None,
              overrides: dict | None = None) -> tuple[Path, dict]:
    started = time.time()
    check_writable(run_dir, BENCH_DIR, overwrite)
    export_dir = require_stage(run_dir, EXPORT_DIR, "pocketbert export")
    # the student's folder is timed as the PyTorch model: checked like the export's files
    student_dir, student_manifest = verified_stage(run_dir, STUDENT_DIR, "pocketbert train distill")
    export_manifest = read_manifest(export_dir, ExportRecord)
    _verify_export(run_dir, export_dir, export_manifest)
    cfg = bench_config(student_manifest.config.recipe, threads, time_cap_s, overrides)
    seq_len, batch = int(cfg.sequence_length), int(cfg.batch_size)
    student_config = read_json_object(export_dir / MODEL_CONFIG, RunDirError, "re-run `pocketbert export`",
                                      "exported config.json")
    max_positions = student_config.get("max_position_embeddings", seq_len)
    if seq_len > max_positions:
        raise RunDirError(f"bench sequence length {seq_len} exceeds the student's {max_positions} positions: "
                          "lower bench.sequence_length")
    labels = read_labels(export_dir)
    task = make_task(export_manifest.config.task, labels)
    longest = min(max_positions, reference.BERT_BASE_CONFIG["max_position_embeddings"])
    seq_sweep = sorted({s for s in cfg.sequence_sweep if s <= longest})
    batch_sweep = sorted(set(cfg.batch_sweep))
    reference_source = reference_source or cfg.reference
    identity = reference.checked_reference(reference_source, task, int(student_config["vocab_size"]))  # before any work

    with staged_output(run_dir, BENCH_DIR, overwrite) as out:
        models, files = _models_and_files(run_dir, task, cfg, export_dir, export_manifest, student_dir, student_manifest,
                                          student_config, reference_source, identity)
        bench = Bench(task, cfg, student_config["vocab_size"])
        headline_files = {m: fs for m, fs in files.items() if m != derive.HALF_DEPTH}
        plan = _runners(headline_files, cfg.threads, cfg.pytorch_threads, export_manifest.config.max_length,
                        tuple(export_manifest.metrics.coreai_entry_points or ()))
        reasons = [runner.unavailable_reason(batch, seq_len) for _, runner in plan]
        runners_status = [{"model": model, "runner": runner.label(), "runtime": runner.runtime,
                           "available": reason is None, "reason": reason}
                          for (model, runner), reason in zip(plan, reasons)]
        runnable = [entry for entry, reason in zip(plan, reasons) if reason is None]
        sweep_runners = {
            (m, p): Runner("onnxruntime", "onnx", files[m][f"onnx-{p}"], p, threads=cfg.sweep_threads)
            for m in (derive.STUDENT, derive.BERT_BASE) for p in ("fp32", "int8")}

        work = [("headline", m, r, batch, seq_len) for m, r in runnable]
        work += [("sequence", m, r, batch, s) for (m, _), r in sweep_runners.items() for s in seq_sweep]
        work += [("batch", m, r, b, seq_len) for (m, p), r in sweep_runners.items() if p == "fp32" for b in batch_sweep]
        for sweep, model, runner, b, s in tqdm(work, desc="bench: latency", unit="config"):
            bench.measure(model, runner, b, s, sweep)

        architecture_pair = _architecture_pair(bench, files, batch, seq_len) if derive.HALF_DEPTH in files else None

        cold = []
        cold_plan = [(m, r) for m, r in runnable if r.threads in (None, min(cfg.threads), min(cfg.pytorch_threads))]
        inputs = bench.inputs(batch, seq_len)
        for model, runner in tqdm(cold_plan, desc="bench: cold start", unit="runner"):
            samples = [cold_start(runner, task, inputs) for _ in range(int(cfg.cold_start_repeats))]
            median = {k: sorted(s[k] for s in samples)[len(samples) // 2] for k in samples[0]}
            cold.append({"model": model, **runner.setting(), "repeats": len(samples), **median})

        tokenization = _tokenization_rows(bench, export_dir, student_manifest, files[derive.STUDENT], seq_len,
                                          int(cfg.tokenization_examples))

        costs = _graph_costs(bench, files, batch, seq_len, seq_sweep, batch_sweep)
        host_info = host.host_info()
        thread_counts = sorted({*cfg.threads, *cfg.pytorch_threads, cfg.sweep_threads})
        phone_profiles = profiles.load_profiles()
        student_metrics = student_manifest.metrics
        primary = student_metrics.primary_metric
        sizes = export_manifest.metrics.sizes_bytes
        results = {
            "schema": RESULTS_SCHEMA,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "run": str(run_dir),
            "git_commit": git_commit(),
            "versions": package_versions(),
            "host": host_info,
            "host_profile": profiles.measure_host(thread_counts, host_info["cpu"]),
            "profiles": {k: profiles.resolve_sources(p, phone_profiles["sources"])
                         for k, p in phone_profiles["devices"].items()},
            "protocol": {"batch_size": batch, "sequence_length": seq_len, "threads": cfg.threads,
                         "pytorch_threads": cfg.pytorch_threads, "warmup": cfg.warmup,
                         "min_repeats": cfg.min_repeats, "max_repeats": cfg.max_repeats,
                         "time_cap_s": cfg.time_cap_s, "interval": "95 % order-statistic interval of the median",
                         "target_relative_half_width": TARGET_RELATIVE_HALF_WIDTH, "sequence_sweep": seq_sweep, "batch_sweep": batch_sweep,
                         "sweep_threads": cfg.sweep_threads, "cold_start_repeats": cfg.cold_start_repeats,
                         "inputs": "random in-vocabulary token ids, full attention"},
            "models": models,
            "runners": runners_status,
            "accuracy": {
                "metric": primary,
                "eval_set": _eval_set_text(student_manifest),
                "student": student_metrics.eval[primary],
                # an imported student has no teacher
                "teacher": (student_metrics.teacher_eval or {}).get(primary),
                "fraction_of_teacher_kept": student_metrics.fraction_of_teacher_kept,
                "exported": {name: {"value": r.metrics.get(primary), "agreement_with_student": r.agreement,
                                    "n_examples": r.n_examples, "runtime": r.runtime,
                                    "precision": r.precision, "model_format": _artifact_format(name, r.runtime or ""),
                                    "size_bytes": sizes.get(name)}
                             for name, r in export_manifest.metrics.parity.items()},
            },
            "measurements": list(bench.rows.values()) + tokenization + collect_imports(run_dir),
            "killed": killed_imports(run_dir),
            "cold_start": cold,
            "architecture_pair": architecture_pair,
            "graph_costs": costs,
            "placement": student_placement(export_manifest),
            "vocabulary": shipped_vocabulary(export_manifest),
            "published": published.published_line(task.name),
        }
        derive.derive(results)
        results["wall_time_s"] = round(time.time() - started, 1)
        (out / BENCH_RESULTS).write_text(dumps_strict(results, indent=2) + "\n")
        report.write_reports(out / BENCH_RESULTS, out)
    return Path(run_dir) / BENCH_DIR, results


def _eval_set_text(student_manifest: StudentRecord) -> str:
    """Which examples the student's score is on: the file, its md5 and the count the distillation recorded."""
    metrics, dataset = student_manifest.metrics, student_manifest.config.dataset
    record = metrics.eval_set
    if record is None:  # an imported student scores the eval split as it is
        return f"{dataset} eval ({metrics.eval['n_examples']} examples)"
    scored = metrics.eval.get("scored") or f"on {record['scored']:,} examples"
    return f"{dataset}, {scored.removeprefix('on ')}, md5 {record['md5']}"


def _models_and_files(run_dir: Path, task, cfg: BenchSection, export_dir: Path, export_manifest: ExportRecord,
                      student_dir: Path, student_manifest: StudentRecord, student_config: dict, reference_source: str | None,
                      identity: str | None = None) -> tuple[dict, dict]:
    """What each compared model is, and its files per format and precision (exporting references once)."""
    progress = tqdm(total=3, desc="bench: reference models", unit="model", leave=False)
    # the export's files as its manifest lists them (no ExecuTorch programs for a BiLSTM, or where the recipe
    # leaves them out), and the student folder
    student_files = _with_pytorch(student_export_files(export_dir, export_manifest), student_dir)
    # BERT-base's ExecuTorch programs (two minutes of export on 2 cores) only where the student has some to compare
    with_pte = any(f"pte-{p}" in student_files for p in PTE_FILES)
    bert_dir, bert_describe = reference.bert_base(task, reference_source, identity)
    pte_dir = reference.bert_base_programs(task, reference_source, identity) if with_pte else None
    progress.update()
    bert_config = read_json_object(bert_dir / reference.PYTORCH_DIR / MODEL_CONFIG, RunDirError,
                                   "delete the reference cache folder and bench again", "reference config.json")
    models = {
        derive.STUDENT: {"description": f"distilled student ({student_dir})", **_model_summary(student_config),
                         "parameters": student_manifest.metrics.parameters},
        derive.BERT_BASE: {"description": bert_describe, **_model_summary(bert_config)},
    }
    files = {
        derive.STUDENT: student_files,
        derive.BERT_BASE: {"onnx-fp32": bert_dir / ONNX_FP32, "onnx-int8": bert_dir / ONNX_INT8,
                           "pytorch-fp32": bert_dir / reference.PYTORCH_DIR,
                           **({f"pte-{p}": pte_dir / name for p, name in PTE_FILES.items()} if pte_dir else {})},
    }
    teacher_dir = Path(run_dir) / TEACHER_DIR
    teacher_config = read_json_object(teacher_dir / MODEL_CONFIG, RunDirError, "re-run `pocketbert train teacher`",
                                      "teacher's config.json") if teacher_dir.is_dir() else None
    if teacher_config and _model_summary(teacher_config) != _model_summary(bert_config):
        t_dir, t_describe = reference.teacher(task, teacher_dir, sha256_of(teacher_dir))
        models[derive.TEACHER] = {"description": t_describe, **_model_summary(teacher_config)}
        files[derive.TEACHER] = {"onnx-fp32": t_dir / ONNX_FP32, "onnx-int8": t_dir / ONNX_INT8,
                                 "pytorch-fp32": teacher_dir}
    progress.update()
    if cfg.architecture_check:
        half_dir, half_describe = reference.half_depth_student(task)
        models[derive.HALF_DEPTH] = {"description": half_describe,
                                     **_model_summary({**reference.BERT_BASE_CONFIG,
                                                       "num_hidden_layers": reference.HALF_DEPTH_LAYERS})}
        files[derive.HALF_DEPTH] = {"onnx-fp32": half_dir / ONNX_FP32}
    progress.update()
    progress.close()
    for name, fs in files.items():
        models[name]["files"] = _files_entry(fs)
    return models, files


def _architecture_pair(bench: Bench, files: dict, batch: int, seq_len: int) -> dict:
    """The half-depth student and BERT-base timed in turn (fp32, 1 thread), for a ratio free of the machine's drift."""
    runners = {m: Runner("onnxruntime", "onnx", files[m]["onnx-fp32"], "fp32", threads=1)
               for m in (derive.HALF_DEPTH, derive.BERT_BASE)}
    inputs = bench.inputs(batch, seq_len)
    loaded = [runners[m].load(bench.task) for m in runners]
    stats = measure_interleaved([lambda run=run: run(inputs) for run in loaded], bench.cfg.warmup,
                                bench.cfg.min_repeats, bench.cfg.max_repeats, bench.cfg.time_cap_s)
    pair = dict(zip(runners, (s.to_dict() for s in stats)))
    bench.rows[("architecture", derive.HALF_DEPTH)] = _row(derive.HALF_DEPTH, runners[derive.HALF_DEPTH].setting(),
                                                           batch, seq_len, "architecture", pair[derive.HALF_DEPTH])
    return {"batch": batch, "sequence_length": seq_len, "runtime": "onnxruntime fp32, 1 thread",
            "order": "interleaved", **pair}


TOKENIZATION_EXCLUDED_SAME_TEXTS = "excluded (same texts)"


def _tokenization_rows(bench: Bench, export_dir: Path, student_manifest: StudentRecord, student_files: dict, seq_len: int,
                       n_examples: int) -> list[dict]:
    """Tokenizer alone, the student alone on the same texts tokenized beforehand, and both together: one real
    eval example per call, as in an app. Measured back to back, so the difference is the tokenizer's share."""
    texts = eval_texts(student_manifest, bench.task, n_examples)
    if not texts:
        return []
    tokenize = tokenizer_runner(export_dir, seq_len)
    pretokenized = [tokenize(t) for t in texts]
    position = {"i": 0}

    def next_index() -> int:
        position["i"] = (position["i"] + 1) % len(texts)
        return position["i"]

    def measure(run_once) -> dict:
        return measure_until_stable(run_once, bench.cfg.warmup, bench.cfg.min_repeats, bench.cfg.max_repeats,
                                    bench.cfg.time_cap_s).to_dict()

    tokenizer = {"runtime": "tokenizers", "model_format": TOKENIZER_JSON, "precision": "-", "threads": 1,
                 "compute_units": None}
    rows = [_row("tokenizer", tokenizer, 1, seq_len, "tokenization", measure(lambda: tokenize(texts[next_index()])),
                 "only")]
    for precision in ("fp32", "int8"):
        runner = Runner("onnxruntime", "onnx", student_files[f"onnx-{precision}"], precision, threads=1)
        run = runner.load(bench.task)
        rows.append(_row(derive.STUDENT, runner.setting(), 1, seq_len, "tokenization",
                         measure(lambda run=run: run(pretokenized[next_index()])), TOKENIZATION_EXCLUDED_SAME_TEXTS))
        rows.append(_row(derive.STUDENT, runner.setting(), 1, seq_len, "tokenization",
                         measure(lambda run=run: run(tokenize(texts[next_index()]))), "included"))
    return rows


def _graph_costs(bench: Bench, files: dict, batch: int, seq_len: int, seq_sweep: list[int],
                 batch_sweep: list[int]) -> dict:
    """FLOPs and bytes per model at the headline shape, and per shape for the swept models."""
    shapes = {m: {(batch, seq_len)} for m in files}
    for m in (derive.STUDENT, derive.BERT_BASE):
        shapes[m] |= {(batch, s) for s in seq_sweep} | {(b, seq_len) for b in batch_sweep}
    by_shape: dict[str, dict] = {}
    for model in tqdm(files, desc="bench: counting FLOPs", unit="model"):
        ordered = sorted(shapes[model])
        counted = graph_cost.count_graph_costs(files[model]["onnx-fp32"], [bench.inputs(b, s) for b, s in ordered])
        weights = {"fp32": counted[0].weight_bytes}  # weights do not depend on the input shape
        if "onnx-int8" in files[model]:
            weights["int8"] = graph_cost.weight_bytes(files[model]["onnx-int8"])
        by_shape[model] = {f"{b}x{s}": {"flops": c.flops, "matmul_flops": c.matmul_flops, "io_bytes": c.io_bytes,
                                        "activation_bytes": c.activation_bytes, "weight_bytes": weights}
                           for (b, s), c in zip(ordered, counted)}
    return {"headline": {m: costs[f"{batch}x{seq_len}"] for m, costs in by_shape.items()}, "by_shape": by_shape}


def _check_measured_export(run_dir: Path, rows: list[dict], file: Path) -> None:
    """A row that names the program it measured (its sha256) must name one of this run's export, by that name (a
    multifunction package's function, by its package's); the tokenizer files a kit checked must be its export's."""
    from pocketbert.mobile_bench.device.phone_import import package_of

    named = [row for row in rows if row.get("program_sha256")]
    checked = {(key, row["tokenizer_check"][f"{key}_sha256"]) for row in rows if row.get("tokenizer_check")
               for key in ("tables", "golden")}
    if not named and not checked:
        return
    manifest_path = Path(run_dir) / EXPORT_DIR / MANIFEST
    if not manifest_path.is_file():
        raise RunDirError(f"{file} measured an export, and {run_dir} has none to check it against: import it into "
                          "the run whose export it measured")
    manifest = read_manifest(Path(run_dir) / EXPORT_DIR, ExportRecord)
    artifacts_recorded = manifest.artifacts or {}
    recorded = {entry.sha256: name for name, entry in artifacts_recorded.items()}
    for row in named:
        program = recorded.get(row["program_sha256"])
        if program is None or (row.get("program") and package_of(row["program"]) != program):
            raise ConfigError(f"{file} measured {row.get('program') or 'a program'} with sha256 "
                              f"{row['program_sha256'][:12]}…, which {run_dir}/export does not hold: import it into "
                              "the run whose export it measured, or measure this export (pocketbert bench kit)")
        _check_program_claims(row, program, manifest, Path(run_dir) / EXPORT_DIR, file)
    for key, digest in sorted(checked):
        name = {"tables": TOKENIZER_TABLES, "golden": TOKENIZER_GOLDEN}[key]
        entry = artifacts_recorded.get(name)
        if entry is not None and entry.sha256 != digest:
            raise ConfigError(f"{file} checked the tokenizer on a {name} with sha256 {digest[:12]}…, not the one "
                              f"{run_dir}/export holds: import it into the run whose export it measured, or measure "
                              "this export (pocketbert bench kit)")


def _check_program_claims(row: dict, program: str, manifest: ExportRecord, export_dir: Path, file: Path) -> None:
    """What a row says of the program its sha256 names, against the export's own record of that program: its
    runtime (and so its file format), its precision, and the function measured (one the package holds, at that
    function's length)."""
    from pocketbert.mobile_bench.device.kit import apple_programs, program_functions
    from pocketbert.export.programs.multifunction import function_length, function_name

    made = {p["program"]: p for p in apple_programs(manifest)}.get(program)
    if made is None:
        raise ConfigError(f"{file}: {program} is not one of the export's Core ML or Core AI programs, which the kit "
                          "measures: measure this export with `pocketbert bench kit`")
    for claim in ("runtime", "precision"):
        if row[claim] != made[claim]:
            raise ConfigError(f"{file}: {program} is a {made['runtime']} {made['precision']} program, not "
                              f"{row['runtime']} {row['precision']}: import the file the kit wrote, unedited")
    if row.get("function") is None:
        return
    functions = (program_functions(export_dir).get(program) or []) if made["runtime"] == "coreml" else \
        [function_name(int(n)) for n in (manifest.metrics.coreai_entry_points or [])]
    if row["function"] not in functions:
        raise ConfigError(f"{file}: {program} has no function {row['function']!r} (it has "
                          f"{', '.join(functions) or 'one, main'}): import the file the kit wrote, unedited")
    if function_length(row["function"]) != row["sequence_length"]:
        raise ConfigError(f"{file}: {row['function']} takes sequence {function_length(row['function'])}, not "
                          f"{row['sequence_length']}: import the file the kit wrote, unedited")


def _check_device(rows: list[dict], device_key: str, file: Path) -> None:
    """Every phone file pocketbert reads measured an Apple runtime (Core ML, Core AI): a device key whose profile is
    not an Apple device would put an iPhone's figures under an Android phone's name."""
    device = profiles.load_profiles()["devices"].get(device_key)
    if device is not None and device.get("family") != profiles.APPLE_FAMILY:
        runtimes = ", ".join(sorted({row.get("runtime") or row["model_format"] for row in rows}))
        raise ConfigError(f"{file} measured {runtimes} on an Apple device, and --device {device_key} is "
                          f"{device.get('name', device_key)}: name the Apple device it ran on")


def _import_names(imports: Path, rows: list[dict], device_key: str, model: str, file: Path) -> list[tuple[str, str]]:
    """Each row's file name (one per setting) and text. Two measurements of one setting are never folded into one:
    twice in the file, or a different one already imported, is refused (the same one again changes nothing)."""
    named = []
    for row in rows:
        fmt = "" if row["model_format"] == "mlpackage" else f"-{row['model_format']}"
        # the kit names each program it measured: two programs (or two functions of one) of one precision and
        # length are two settings
        program = f"-{FILE_NAME_UNSAFE.sub('-', row['program'])}" if row.get("program") else ""
        name = (f"{device_key}-{model}{fmt}{program}-{row['compute_units'].lower()}-{row['precision']}"
                f"-b{row['batch']}-s{row['sequence_length']}.json")
        if name in dict(named):
            raise ConfigError(f"{file} measures one setting twice ({name[:-5]}): keep one measurement of it")
        text = dumps_strict(row, indent=2) + "\n"
        if (imports / name).is_file() and (imports / name).read_text(errors="replace") != text:
            raise ConfigError(f"{imports / name} already holds a measurement of this setting: remove it to "
                              "replace it with this one")
        named.append((name, text))
    return named


def import_phone_measurement(run_dir: Path, file: Path, device_key: str, model: str, precision: str, batch: int,
                             sequence_length: int | None) -> tuple[Path, Path | None]:
    """Save the measurement under bench_imports/; when the run has a report, re-derive and re-render it."""
    from pocketbert.mobile_bench.device.phone_import import import_phone_rows

    if not Path(run_dir).is_dir():
        raise RunDirError(f"{run_dir} is not a run directory: name the run the measurement belongs to")
    results_path = Path(run_dir) / BENCH_DIR / BENCH_RESULTS
    existing = read_results(results_path) if results_path.is_file() else None
    if sequence_length is None and existing is not None:
        sequence_length = existing["protocol"]["sequence_length"]
    rows = import_phone_rows(file, device_key, model, precision, batch, sequence_length)
    _check_device(rows, device_key, file)
    _check_measured_export(run_dir, rows, file)
    imports = Path(run_dir) / BENCH_IMPORTS_DIR
    named = _import_names(imports, rows, device_key, model, file)
    made = not imports.exists()
    imports.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        for name, text in named:
            write_text_atomically(imports / name, text)  # no half file if killed
            written.append(imports / name)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        if made:  # nor the folder made for them
            shutil.rmtree(imports, ignore_errors=True)
        raise
    target = written[0] if len(written) == 1 else imports
    if existing is None:
        return target, None
    existing["measurements"] = [m for m in existing["measurements"] if m.get("device", derive.HOST) == derive.HOST]
    existing["measurements"] += collect_imports(run_dir)
    existing["killed"] = killed_imports(run_dir)
    derive.derive(existing)
    with staged_output(run_dir, BENCH_DIR, overwrite=True) as out:
        (out / BENCH_RESULTS).write_text(dumps_strict(existing, indent=2) + "\n")
        report.write_reports(out / BENCH_RESULTS, out)
    return target, Path(run_dir) / BENCH_DIR

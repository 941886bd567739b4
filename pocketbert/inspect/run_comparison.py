"""`pocketbert compare R1 R2 ...`: which student to ship, from the finished runs' own JSON files.

One row per run's student, and one for each distinct teacher: accuracy in domain and across domains (the
student manifest), latency on one runtime, precision and thread count (the run's bench/results.json), file
size (the same file bench timed) and training time (the stage manifests). The Pareto plot marks the rows
that no other row beats on both latency and accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocketbert.core.errors import ConfigError
from pocketbert.core.run.manifest import command_line, read_manifest
from pocketbert.core.run.stage_records import StudentRecord, TeacherRecord, TrainedConfig
from pocketbert.core.config.recipe import complete_recipe, recorded_keys
from pocketbert.core.run.atomic_folder import require_stage
from pocketbert.core.run.run_files import BENCH_DIR, BENCH_RESULTS, MANIFEST, STUDENT_DIR, TEACHER_DIR
from pocketbert.core.run.user_paths import inside_run, recorded_path

MIN_RUNS = 2
MADE_BY = "compare"  # the --out folder's marker: what a later --overwrite may replace


def _measurement(bench: dict | None, model: str, runtime: str, model_format: str, precision: str,
                 threads: int) -> dict | None:
    if not bench:
        return None
    for m in bench["measurements"]:
        if (m["model"], m["runtime"], m["model_format"], m["precision"], m["threads"], m["sweep"]) == \
                (model, runtime, model_format, precision, threads, "headline"):
            return m
    return None


def _size(bench: dict | None, model: str, model_format: str, precision: str) -> int | None:
    files = ((bench or {}).get("models", {}).get(model) or {}).get("files", {})
    entry = files.get(f"{model_format}-{precision}")
    return entry["size_bytes"] if entry else None


def _row(name: str, kind: str, metrics: dict, primary: str, cross_domain: dict, bench: dict | None, model: str,
         setting: dict, parameters: int | None, training_s: float | None, sources: list[str]) -> dict:
    measured = _measurement(bench, model, **setting)
    return {
        "name": name, "kind": kind, "accuracy": metrics[primary], "n_examples": metrics.get("n_examples"),
        "cross_domain": cross_domain, "parameters": parameters,
        "latency_ms": measured["median_ms"] if measured else None,
        "latency_interval_ms": [measured["ci_low_ms"], measured["ci_high_ms"]] if measured else None,
        "size_bytes": _size(bench, model, setting["model_format"], setting["precision"]),
        "training_seconds": training_s, "host": (bench or {}).get("host", {}).get("cpu"), "sources": sources,
    }


def recipe_name(config: TrainedConfig) -> str:
    """The training recipe a student manifest names (train/registry.py's name, under RECIPE_NAME); a manifest
    written before the name was recorded there names it in its recipe's distill.recipe (the default filled)."""
    if config.imported_from is not None:
        return "imported"
    return config.recipe_name or complete_recipe(config.recipe).distill.recipe


def pareto(rows: list[dict], metric: str = "accuracy") -> list[str]:
    """Names of the rows with latency and the metric that no other row beats on both (ties do not beat)."""
    points = [r for r in rows if r["latency_ms"] is not None and r[metric] is not None]
    front = []
    for r in points:
        beaten = any(o is not r and o["latency_ms"] <= r["latency_ms"] and o[metric] >= r[metric]
                     and (o["latency_ms"] < r["latency_ms"] or o[metric] > r[metric]) for o in points)
        if not beaten:
            front.append(r["name"])
    return front


def compare_runs(run_dirs: list[Path], runtime: str = "onnxruntime", model_format: str = "onnx",
                 precision: str = "int8", threads: int = 1) -> dict:
    if len(run_dirs) < MIN_RUNS:
        raise ConfigError(f"compare needs at least {MIN_RUNS} finished runs (got {len(run_dirs)})")
    setting = {"runtime": runtime, "model_format": model_format, "precision": precision, "threads": threads}
    rows, teachers, primaries, cross_names, datasets = [], {}, set(), [], set()
    for run in map(Path, run_dirs):
        student_dir = require_stage(run, STUDENT_DIR, "pocketbert train distill")
        student = read_manifest(student_dir, StudentRecord)
        m = student.metrics
        primary = m.primary_metric
        primaries.add(primary)
        datasets.add(student.config.dataset)
        bench_path = run / BENCH_DIR / BENCH_RESULTS
        bench = json.loads(bench_path.read_text()) if bench_path.is_file() else None
        cross = {d: pair["student"][primary] for d, pair in (m.cross_domain or {}).items()}
        cross_names += [d for d in cross if d not in cross_names]
        recipe = recipe_name(student.config)
        if m.pruning or "intermediate_size_after" in recorded_keys(student.config.recipe, "prune"):
            recipe += ", pruned"  # `train prune` records what it cut (in the recovery's recipe before 0.1.x)
        sources = [str(student_dir / MANIFEST)] + ([str(bench_path)] if bench else [])
        rows.append(_row(run.name, f"student ({recipe})", m.eval, primary, cross, bench, "student", setting,
                         m.parameters, student.wall_time_s, sources))
        teacher_input = student.inputs.get("teacher")
        if teacher_input is None or not m.teacher_eval:
            continue  # an imported student has no teacher to compare
        # the same teacher copied into several runs is one row: the hash distillation recorded says so, and no
        # path named in a manifest is followed out of the run (the user named only the runs)
        key = teacher_input.sha256 or teacher_input.path
        if key not in teachers:
            teacher_dir = recorded_path(run, student.config.teacher or TEACHER_DIR)
            own = inside_run(run, teacher_dir) and (teacher_dir / MANIFEST).is_file()
            teacher_manifest = read_manifest(teacher_dir, TeacherRecord) if own else None
            teachers[key] = _row(f"teacher of {run.name}", "teacher", m.teacher_eval, primary,
                                 {d: pair["teacher"][primary] for d, pair in (m.cross_domain or {}).items()},
                                 bench, "teacher", setting, m.teacher_parameters,
                                 teacher_manifest.wall_time_s if teacher_manifest is not None else None,
                                 [str(student_dir / MANIFEST)] + ([str(bench_path)] if bench else []))
    if len(primaries) > 1 or len(datasets) > 1:
        raise ConfigError(f"the runs were trained on different datasets or tasks ({', '.join(sorted(map(str, datasets)))}"
                          "): their accuracies are not comparable; compare runs of one dataset")
    rows += list(teachers.values())
    hosts = {r["host"] for r in rows if r["host"]}
    return {
        "command": command_line(), "primary_metric": primaries.pop(), "dataset": datasets.pop(), "setting": setting,
        "rows": rows,
        "cross_domain_datasets": cross_names, "pareto": pareto(rows),
        "pareto_cross_domain": {d: _cross_pareto(rows, d) for d in cross_names},
        "hosts": sorted(hosts),
        "comparable_latency": len(hosts) <= 1,
    }


def _cross_pareto(rows: list[dict], dataset: str) -> list[str]:
    view = [{**r, "accuracy": r["cross_domain"].get(dataset)} for r in rows]
    return pareto(view)


def render_table(result: dict) -> str:
    s = result["setting"]
    primary = result["primary_metric"]
    cross = result["cross_domain_datasets"]
    lines = [f"# Which student to ship ({primary}; latency: {s['runtime']} {s['model_format']} {s['precision']}, "
             f"{s['threads']} thread(s), batch 1, median)", ""]
    if not result["comparable_latency"]:
        lines += [f"Latencies come from different hosts ({'; '.join(result['hosts'])}): compare them with care.", ""]
    head = ["run", "model", f"{primary} in domain", *[f"on {d}" for d in cross], "latency (ms)", "file (MB)",
            "parameters (M)", "training (min)", "Pareto"]
    lines += ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 3) + "---|"]
    for r in result["rows"]:
        cells = [r["name"], r["kind"], f"{r['accuracy']:.4f}",
                 *[f"{r['cross_domain'][d]:.4f}" if d in r["cross_domain"] else "—" for d in cross],
                 f"{r['latency_ms']:.2f}" if r["latency_ms"] is not None else "not benched",
                 f"{r['size_bytes'] / 1e6:.1f}" if r["size_bytes"] else "—",
                 f"{r['parameters'] / 1e6:.2f}" if r["parameters"] else "—",
                 f"{r['training_seconds'] / 60:.1f}" if r["training_seconds"] else "—",
                 "yes" if r["name"] in result["pareto"] else ""]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Pareto: no other row is both faster and more accurate in domain. Every number comes from the "
              "files listed under `sources` in compare.json.", "", "![Pareto plot](compare.png)", ""]
    return "\n".join(lines)


def plot_pareto(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = [("in domain", result["pareto"], lambda r: r["accuracy"])]
    views += [(f"on {d}", result["pareto_cross_domain"][d], lambda r, d=d: r["cross_domain"].get(d))
              for d in result["cross_domain_datasets"]]
    fig, axes = plt.subplots(1, len(views), figsize=(6 * len(views), 4.6), squeeze=False)
    for ax, (title, front, metric) in zip(axes[0], views):
        points = [r for r in result["rows"] if r["latency_ms"] is not None and metric(r) is not None]
        for r in points:
            size = 30 + 300 * (r["size_bytes"] or 0) / max((p["size_bytes"] or 1) for p in points)
            on_front = r["name"] in front
            ax.scatter(r["latency_ms"], metric(r), s=size, alpha=0.8, edgecolors="black" if on_front else "none",
                       color="#2a9d8f" if r["kind"].startswith("student") else "#e76f51")
            ax.annotate(r["name"], (r["latency_ms"], metric(r)), fontsize=8, xytext=(5, 4), textcoords="offset points")
        frontier = sorted((r for r in points if r["name"] in front), key=lambda r: r["latency_ms"])
        ax.plot([r["latency_ms"] for r in frontier], [metric(r) for r in frontier], "--", color="grey", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylabel(f"{result['primary_metric']} {title}")
        ax.set_title(f"{title}: marker area ∝ file size; outlined: Pareto")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

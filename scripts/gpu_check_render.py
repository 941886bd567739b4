"""The Markdown of `make gpu-check`, rendered from its JSON alone: the table beside the JSON, and the block of
results/README.md between its gpu-check markers.

    python scripts/gpu_check_render.py [--json results/gpu/gpu_check.json] [--readme results/README.md]

Rewrites <json's folder>/gpu_check.md and the README block; with no JSON yet, the block says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = REPO_ROOT / "results" / "gpu" / "gpu_check.json"
DEFAULT_README = REPO_ROOT / "results" / "README.md"
BEGIN = "<!-- gpu-check: rendered by scripts/gpu_check_render.py from results/gpu/gpu_check.json; do not edit -->"
END = "<!-- /gpu-check -->"
DASH = "—"


def number(value, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return DASH
    return f"{value:,.{digits}f}{suffix}"


def points(value) -> str:
    return DASH if value is None else f"{value:+.2f} points"


def rate(train: dict) -> str:
    """A training loop's examples/s and seconds."""
    if not train or train.get("examples_per_second") is None:
        return DASH
    return f"{number(train['examples_per_second'])} examples/s, {number(train.get('loop_seconds'), 1)} s"


def graphs(train: dict) -> str:
    report = (train or {}).get("cuda_graphs") or {}
    if not report:
        return DASH
    if report.get("used"):
        return f"{report.get('steps_replayed')} of {(train.get('steps'))} steps replayed"
    return f"not used: {report.get('not_used_because', '?')}"


def heading(result: dict) -> list[str]:
    setup = result["parts"].get("setup", {}).get("figures", {})
    gpu = setup.get("gpu") or {}
    device = gpu.get("name") or f"CPU ({setup.get('cpu_cores', '?')} cores)"
    changed = f" with {result['git_changed_files']} files changed" if result.get("git_changed_files") else ""
    lines = [f"`make gpu-check` of {result['date']}, commit {result.get('git_commit') or '?'}{changed}: {device}, "
             f"torch {setup.get('torch', '?')}, transformers {(setup.get('versions') or {}).get('transformers', '?')}; "
             f"set-up {number(result.get('setup_s'), 1)} s, the whole check {number(result.get('wall_time_s'), 1)} s "
             f"of {result['budget_s']['total']} s."]
    if len(result.get("calls") or []) > 1:
        lines.append("")
        lines.append("Measured in calls of their own (`--update` keeps the parts a later call did not run): " + "; ".join(
            f"call {i}, {c.get('date')}, commit {c.get('git_commit') or '?'}, {c.get('device') or 'CPU'}, "
            f"{number(c.get('wall_time_s'), 1)} s: {', '.join(c['parts'])}" for i, c in enumerate(result["calls"], start=1))
            + ". The heading's figures are the last call's.")
    if result["mode"] == "dry":
        lines.append("")
        lines.append("**Dry run**: toy models and data on the CPU. These figures show that every part runs; they "
                     "measure nothing.")
    if (setup.get("kit") or {}).get("max_abs_change_from_fp16") is not None:
        lines.append("")
        lines.append(f"The teacher's base weights travelled in fp16 and were widened back to fp32 (max |change| "
                     f"{setup['kit']['max_abs_change_from_fp16']:.1e}).")
    return lines


def parts_table(result: dict) -> list[str]:
    lines = ["| part | status | seconds (cap) | why not done |", "|---|---|---:|---|"]
    for name, record in result["parts"].items():
        seconds = f"{number(record.get('seconds'), 1)} ({number(record.get('cap_s'))})" if "seconds" in record else DASH
        lines.append(f"| {name} | {record['status']} | {seconds} | {record.get('reason', '')} |")
    return lines


def stages_section(fig: dict) -> list[str]:
    lines = ["| stage | wall time | training loop | SST-2 dev | against the CPU run | IMDb | CUDA graphs |",
             "|---|---:|---:|---:|---|---:|---|"]
    # the distillation evaluates both models on IMDb
    imdb_pair = (((fig.get("student") or {}).get("cross_domain") or {}).get("imdb") or {})
    for role in ("teacher", "student"):
        stage = fig.get(role)
        if not stage:
            continue
        cpu = (fig.get("against_cpu") or {}).get(role)
        against = DASH if not cpu else (f"{cpu['cpu_accuracy']:.4f}, {points(cpu['difference_points'])} "
                                        f"({'within' if cpu['within_noise'] else 'outside'} noise, s.e. "
                                        f"{cpu['standard_error_points']:.2f})")
        imdb = (imdb_pair.get(role) or {}).get("accuracy")
        lines.append(f"| {role} | {number(stage.get('wall_time_s'), 1, ' s')} | {rate(stage['train'])} | "
                     f"{number((stage.get('eval') or {}).get('accuracy'), 4)} | {against} | {number(imdb, 4)} | "
                     f"{graphs(stage['train'])} |")
    return lines


def large_batch_section(fig: dict) -> list[str]:
    lines = ["| batch | seeds | SST-2 dev | IMDb | training loop | learning rate | steps | wall time |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for batch, row in (fig.get("rows") or {}).items():
        lines.append(f"| {batch} | {row.get('seeds', 1)} | {number(row['sst2_accuracy'], 4)} | "
                     f"{number(row['imdb_accuracy'], 4)} | {number(row['examples_per_second'])} examples/s | "
                     f"{row['learning_rate']:.3g} | {row['steps']} | {number(row['wall_time_s'], 1, ' s')} |")
    runs = fig.get("runs") or {}
    if runs and not fig.get("rows"):  # stopped by its cap: the seeds each batch size finished, averaged
        for batch, rows in runs.items():
            sst2 = [r["sst2_accuracy"] for r in rows]
            lines.append(f"| {batch} | {len(rows)} | {number(sum(sst2) / len(sst2), 4)} | "
                         f"{number(sum(r['imdb_accuracy'] for r in rows) / len(rows), 4)} | "
                         f"{number(sum(r['examples_per_second'] for r in rows) / len(rows))} examples/s | "
                         f"{rows[0]['learning_rate']:.3g} | {rows[0]['steps']} | "
                         f"{number(sum(r['wall_time_s'] for r in rows) / len(rows), 1, ' s')} |")
    if runs:
        each = "; ".join(f"batch {batch}: " + ", ".join(f"seed {r['seed']} {number(r['sst2_accuracy'], 4)}"
                                                       for r in rows) for batch, rows in runs.items())
        lines += ["", f"SST-2 dev of each run: {each}."]
    if "sst2_drop_points" in fig:
        verdict = "within" if fig["within_target"] else "outside"
        lines += ["", f"Averaged over {fig.get('seeds', 1)} seed(s) each, the large batch loses "
                      f"{fig['sst2_drop_points']:.2f} points on SST-2 dev ({verdict} the {fig['target_points']} point "
                      f"target) and {number(fig.get('imdb_drop_points'), 2)} on IMDb."]
    return lines


def profile_section(fig: dict) -> list[str]:
    lines = ["| batch | step | inside PyTorch operators (host) | outside them (host) | GPU kernels | operator calls | "
             "examples/s |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for key, summary in fig.items():
        lines.append(f"| {summary['batch_size']} | {number(summary['step_ms'], 2, ' ms')} | "
                     f"{number(summary['aten_self_ms_per_step'], 2, ' ms')} | "
                     f"{number(summary['outside_aten_ms_per_step'], 2, ' ms')} | "
                     f"{number(summary.get('gpu_kernel_ms_per_step'), 2, ' ms')} | "
                     f"{number(summary['operator_calls_per_step'])} | {number(summary['examples_per_second'])} |")
    for key, summary in fig.items():
        top = ", ".join(f"{op['name']} {op['self_cpu_ms_per_step']:.3f} ms" for op in summary["top_operators"][:5])
        lines += ["", f"Batch {summary['batch_size']}, the top host operators per step: {top}."]
    return lines


def resume_section(fig: dict) -> list[str]:
    if "verdict" not in fig:
        return [f"Killed after step {fig['killed_after_step']}; not resumed." if "killed_after_step" in fig else ""]
    diff, control = fig.get("max_abs_weight_diff"), fig.get("run_to_run") or {}
    lines = [f"Killed with SIGKILL after step {fig['killed_after_step']}, resumed at step "
             f"{fig.get('resumed_at_step') or '?'} with `--resume` "
             f"({graphs({'cuda_graphs': fig.get('cuda_graphs'), 'steps': fig.get('steps')})}). The resumed "
             f"student's weights against the uninterrupted one's: **{fig['verdict']}** (max |difference| "
             f"{exponent(diff)}, tolerance {fig['tolerance']:g}); SST-2 dev {number(fig.get('resumed_accuracy'), 4)} "
             f"against {number(fig.get('uninterrupted_accuracy'), 4)}."]
    if control:
        lines[0] += (f" The control, the uninterrupted run a second time: max |difference| "
                     f"{exponent(control.get('max_abs_weight_diff'))} to the first"
                     f"{' (bitwise equal)' if control.get('bitwise_equal') else ''}, SST-2 dev "
                     f"{number(control.get('accuracy'), 4)}.")
    return lines


def exponent(value: float | None) -> str:
    return DASH if value is None else f"{value:.2e}"


def qa_section(fig: dict) -> list[str]:
    lines = ["| model | wall time | training loop | exact match | F1 |", "|---|---:|---:|---:|---:|"]
    for role in ("teacher", "student"):
        stage = fig.get(role)
        if stage:
            ev = stage.get("eval") or {}
            lines.append(f"| {role} | {number(stage.get('wall_time_s'), 1, ' s')} | {rate(stage['train'])} | "
                         f"{number(ev.get('exact_match'), 1)} | {number(ev.get('f1'), 1)} |")
    return lines


BENCH_LOOPS = {"reference": "reference loop (max-length padding, teacher every step)",
               "pocketbert_cold_cache": "pocketbert, teacher cache filled in the epoch",
               "pocketbert_warm_cache": "pocketbert, teacher cache on disk"}


def bench_section(fig: dict) -> list[str]:
    if "timings" not in fig:
        return []
    lines = [f"{fig['examples']:,} examples, batch {fig['batch_size']}, mean length {fig['mean_length']:.1f}:", "",
             "| loop | examples/s | spread |", "|---|---:|---:|"]
    for name, label in BENCH_LOOPS.items():
        t = fig["timings"].get(name) or {}
        lines.append(f"| {label} | {number(t.get('examples_per_second'))} | {number(100 * t['spread'], 1, ' %')} |"
                     if t else f"| {label} | {DASH} | {DASH} |")
    lines += ["", f"Speed-up {fig['speedup_warm_cache']:.2f}× with the cache on disk, "
                  f"{fig['speedup_cold_cache']:.2f}× filling it."]
    return lines


def levers_section(fig: dict) -> list[str]:
    rows = fig.get("rows") or {}
    columns = [(model, batch) for model in rows for batch in rows[model]]
    if not columns:
        return []
    labels = list(dict.fromkeys(label for model, batch in columns for label in rows[model][batch]))
    lines = [f"{fig['examples']:,} examples; examples/s, × the all-off row, spread of the {fig['repeats']} timed runs:",
             "", "| setting | " + " | ".join(f"{model}, batch {batch}" for model, batch in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for label in labels:
        cells = []
        for model, batch in columns:
            row = rows[model][batch].get(label)
            cells.append(DASH if row is None else f"{number(row['examples_per_second'])} "
                         f"({number(row.get('speedup'), 2, '×')}, {number(100 * row['spread'], 0, ' %')})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    notes = [f"not measured (the cap came first): {'; '.join(fig['pending'])}"] if fig.get("pending") else []
    notes += [f"{name} left out: {why}" for name, why in (fig.get("left_out") or {}).items()]
    return lines + ([""] + [f"- {note}" for note in notes] if notes else [])


def ship_section(fig: dict) -> list[str]:
    targets, met = fig.get("targets") or {}, fig.get("met") or {}
    lines = ["| stage | process wall time | training loop | epochs (best) | validation by epoch | SST-2 dev |",
             "|---|---:|---:|---:|---|---:|"]
    for role in ("teacher", "student"):
        stage = fig.get(role)
        if stage:
            epochs = stage.get("epochs") or {}
            scores = ", ".join(f"{v:.4f}" for v in (epochs.get("validation") or {}).values()) or DASH
            lines.append(f"| {role} | {number(stage.get('process_seconds'), 1, ' s')} | {rate(stage['train'])} | "
                         f"{epochs.get('epochs_trained', DASH)} ({epochs.get('best_epoch', DASH)}) | {scores} | "
                         f"{number((stage.get('eval') or {}).get('accuracy'), 4)} |")
    export = fig.get("export") or {}
    lines.append(f"| export | {number(export.get('process_seconds'), 1, ' s') if export.get('ran') else DASH} | | | | |")
    notes = [f"Preset `{fig.get('preset')}`. Teacher target {targets.get('teacher_accuracy')}: "
             f"{'met' if met.get('teacher_accuracy') else 'not met'}; student {number(fig.get('student_share'), 4)} "
             f"of the teacher (target {targets.get('student_share')}): {'met' if met.get('student_share') else 'not met'}; "
             f"{number(fig.get('seconds'), 1, ' s')} in all (target {targets.get('seconds')} s with the export): "
             f"{'met' if met.get('seconds') else 'not met'}."]
    if not export.get("ran") and export.get("why"):
        notes.append(f"Export not run here: {export['why']}.")
    return lines + [""] + notes


SECTIONS = (("stages", "The default run's stages (teacher, then distillation; checkpoints written)", stages_section),
            ("profile", "Where a distillation step's time goes (scripts/profile_train.py, CUDA graphs on)", profile_section),
            ("large_batch", "The large-batch rule (the same teacher)", large_batch_section),
            ("resume", "Resume after a kill", resume_section),
            ("resume_eager", "Resume after a kill, CUDA graphs off (the eager control)", resume_section),
            ("qa", "QA (SQuAD, the QA preset)", qa_section),
            ("bench_train", "`pocketbert bench train` (the student's distillation epoch)", bench_section),
            ("levers", "Training levers (scripts/training_levers.py)", levers_section),
            ("compile", "torch.compile rows of the lever table (a call of their own)", levers_section),
            ("ship", "`make distill export` from nothing, each stage trained until its validation score stopped improving", ship_section))


def render_table(result: dict) -> str:
    """The whole Markdown report of one check, from its JSON."""
    lines = heading(result) + [""] + parts_table(result)
    for name, title, section in SECTIONS:
        record = result["parts"].get(name) or {}
        if record.get("figures"):
            lines += ["", f"**{title}**", ""] + section(record["figures"])
    return "\n".join(lines).rstrip() + "\n"


def readme_block(result: dict | None) -> str:
    if result is None:
        body = ("No `make gpu-check` has run on a GPU yet: its figures land here when one has (docs/gpu.md says how "
                "to run it on a lent machine).")
    else:
        body = render_table(result).rstrip()
    return f"{BEGIN}\n{body}\n{END}"


def update_readme(readme: Path, result: dict | None) -> bool:
    """Replace the README's block with the one rendered from `result`; whether the file changed."""
    text = readme.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{readme} has no gpu-check block ({BEGIN} ... {END})")
    updated = text[:start] + readme_block(result) + text[end + len(END):]
    if updated != text:
        readme.write_text(updated)
    return updated != text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--readme", type=Path, default=DEFAULT_README)
    args = parser.parse_args()
    result = json.loads(args.json.read_text()) if args.json.is_file() else None
    if result is not None:
        (args.json.parent / "gpu_check.md").write_text(render_table(result))
    changed = update_readme(args.readme, result)
    print(f"{args.readme}: {'updated' if changed else 'already up to date'}")


if __name__ == "__main__":
    main()

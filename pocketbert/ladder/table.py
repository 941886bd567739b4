"""The ladder's table and plot, every number read from files the stages and `pocketbert compare` wrote.

compare.json gives each rung's accuracy (in domain and across domains), int8 latency and file size, and the
teacher's; the rungs' export manifests give their parity gates, and the stage manifests and bench results their
wall times. The marked rung of each panel is the cheapest student (lowest latency, or smallest file) whose accuracy
on that panel's data is at most `within_points` below the teacher's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pocketbert.core.files import read_json_object
from pocketbert.core.errors import RunDirError
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.stage_records import ExportRecord, StudentRecord
from pocketbert.core.run.atomic_folder import temp_name
from pocketbert.core.run.run_files import BENCH_DIR, BENCH_RESULTS, EXPORT_DIR, MANIFEST, STUDENT_DIR
from pocketbert.ladder.run_transfer import TRANSFER_DATA, RunTransfer
from pocketbert.ladder.spec import NO_TRANSFER

IN_DOMAIN = "in domain"
COSTS = {"latency_ms": "int8 latency (ms, 1 thread)", "size_bytes": "int8 file (MB)"}  # what a rung costs an app


def _views(compare: dict) -> list[str]:
    return [IN_DOMAIN, *compare["cross_domain_datasets"]]


def metric(row: dict, view: str) -> float | None:
    """A row's accuracy on a panel's data: in domain, or on one cross-domain dataset."""
    return row["accuracy"] if view == IN_DOMAIN else row["cross_domain"].get(view)


def cheapest_within(rows: list[dict], teacher: dict, view: str, cost: str, points: float) -> str | None:
    """The shipped rung of least `cost` whose metric on `view` is at most `points` (percentage points) below the
    teacher's; on a tie of cost, the more accurate. None when no rung is that close."""
    bar = metric(teacher, view)
    if bar is None:
        return None
    close = [r for r in rows if r["ship"] and r[cost] is not None and metric(r, view) is not None
             and metric(r, view) >= bar - points / 100 - 1e-12]
    return min(close, key=lambda r: (r[cost], -metric(r, view)))["rung"] if close else None


def _parity(export: ExportRecord | None) -> dict | None:
    if export is None:
        return None
    gates = export.metrics.parity.values()
    return {"models": len(gates), "passed": sum(g.passed for g in gates),
            "worst_agreement": min(g.agreement for g in gates)}


INT8_VARIANT = "onnx-int8"  # the export's name of the int8 ONNX model, whose file the table's size is


def full_vocabulary_size(export: ExportRecord | None) -> int | None:
    """The rung's int8 ONNX model's size had it kept the full vocabulary, where its export (manifest) fitted the
    vocabulary and measured that size; None for an export of the full vocabulary."""
    file = export.variant_file(INT8_VARIANT) if export is not None else None
    return export.metrics.full_vocabulary_size(file) if file is not None else None


def _bench(run_dir: Path) -> dict | None:
    path = run_dir / BENCH_DIR / BENCH_RESULTS
    if not path.is_file():
        return None
    return read_json_object(path, RunDirError, "re-run `pocketbert bench --overwrite`", "bench results")


def kept_across(row: dict, teacher: dict) -> dict[str, float]:
    """The share of the teacher's accuracy a row keeps on each cross-domain dataset both were evaluated on."""
    return {name: accuracy / teacher["cross_domain"][name] for name, accuracy in row["cross_domain"].items()
            if accuracy is not None and teacher["cross_domain"].get(name)}


def rows_learned(student: StudentRecord) -> dict:
    """What the rung trained on: every row (labelled, transfer data, rewrites), and the labelled and transfer rows
    when the distillation read transfer data (its manifest's transfer_data report)."""
    metrics = student.metrics
    transfer = metrics.transfer_data or {}
    return {"train_examples": (metrics.train or {}).get("train_examples"),
            "labelled_examples": transfer.get("labelled_rows"), "transfer_examples": transfer.get("rows")}


def ladder_result(ladder, compare: dict, compare_path: Path, rung_dirs: dict[str, Path],
                  transfer: RunTransfer = NO_TRANSFER) -> dict:
    """ladder.json: the rungs' rows (from compare.json and the rungs' stage files), the teacher's, the marks, and
    the run's transfer keys the trained rungs inherited."""
    by_name = {r["name"]: r for r in compare["rows"]}
    teachers = [r for r in compare["rows"] if r["kind"] == "teacher"]
    if len(teachers) != 1:
        raise RunDirError(f"the ladder's rungs name {len(teachers)} teachers: every rung must be distilled from the "
                          "run's teacher; remove the ladder folder's rungs and run the ladder again")
    teacher = teachers[0]
    rows = []
    for rung in ladder.rungs:
        run = rung_dirs[rung.name]
        row = by_name[run.name]
        student = read_manifest(run / STUDENT_DIR, StudentRecord)
        bench = _bench(run) if rung.ship else None
        export_dir = run / EXPORT_DIR
        # the rung's export manifest, read once (a control ships nothing)
        export = read_manifest(export_dir, ExportRecord) if rung.ship and (export_dir / MANIFEST).is_file() else None
        rows.append({
            "rung": rung.name, "label": rung.label, "run": str(run), "ship": rung.ship, "kind": row["kind"],
            "scored": student.metrics.eval.get("scored"),  # the questions a sample names
            "accuracy": row["accuracy"], "kept": row["accuracy"] / teacher["accuracy"],
            "cross_domain": row["cross_domain"], "kept_cross_domain": kept_across(row, teacher),
            "latency_ms": row["latency_ms"] if rung.ship else None,
            "latency_interval_ms": row["latency_interval_ms"] if rung.ship else None,
            "size_bytes": row["size_bytes"] if rung.ship else None,
            "size_full_vocabulary_bytes": full_vocabulary_size(export),
            "parameters": row["parameters"],
            **rows_learned(student),
            "parity": _parity(export),
            "wall_time_s": {"distill": student.wall_time_s,
                            "export": export.wall_time_s if export else None,
                            "bench": (bench or {}).get("wall_time_s")},
            "bench_host": ((bench or {}).get("host") or {}).get("cpu"), "benched_at": (bench or {}).get("created"),
            "sources": row["sources"] + ([str(export_dir / MANIFEST)] if rung.ship else []),
        })
    reference = next((r for r, rung in zip(rows, ladder.rungs) if rung.in_run), rows[0])
    for r in rows:
        both = r["latency_ms"] is not None and reference["latency_ms"] is not None
        r["speedup_vs_reference"] = reference["latency_ms"] / r["latency_ms"] if both else None
        both = r["size_bytes"] is not None and reference["size_bytes"] is not None
        r["size_vs_reference"] = r["size_bytes"] / reference["size_bytes"] if both else None
    teacher_row = {k: teacher[k] for k in ("name", "accuracy", "cross_domain", "latency_ms", "size_bytes",
                                            "parameters", "sources")}
    views = _views(compare)
    return {
        "ladder": ladder.model_dump(mode="json"), "primary_metric": compare["primary_metric"],
        "dataset": compare["dataset"], "setting": compare["setting"], "views": views,
        "within_points": ladder.within_points, "reference_rung": reference["rung"],
        "run_transfer": transfer.keys, "run_transfer_source": transfer.source or None,
        "teacher": teacher_row, "rungs": rows,
        "cheapest": {cost: {view: cheapest_within(rows, teacher_row, view, cost, ladder.within_points)
                            for view in views} for cost in COSTS},
        "hosts": compare["hosts"], "comparable_latency": compare["comparable_latency"],
        "compare": str(compare_path),
    }


def _number(value, fmt: str, scale: float = 1.0) -> str:
    return format(value / scale, fmt) if value is not None else "—"


def trained_on(row: dict) -> str:
    """The "trained on" cell: every row, or the labelled rows + the transfer rows (+ rewrites, when augmented)."""
    total, transfer = row["train_examples"], row["transfer_examples"]
    if not transfer or total is None:
        return _number(total, ",.0f")
    labelled = row["labelled_examples"] or total - transfer
    rewrites = total - labelled - transfer
    return f"{labelled:,} + {transfer:,} unlabelled" + (f" + {rewrites:,} rewrites" if rewrites > 0 else "")


def _percent(share) -> str:
    return f"{100 * share:.1f} %" if share is not None else "—"


def _inherited(result: dict) -> list[str]:
    keys = result["run_transfer"]
    if not keys.get(TRANSFER_DATA):
        return []
    cap = keys.get("transfer.max_examples")
    return [f"The rungs the ladder trained also learned from the run's transfer data ({', '.join(keys[TRANSFER_DATA])}"
            f"{f', at most {cap:,} rows' if cap else ''}; from {result['run_transfer_source']}): unlabelled text "
            "the teacher labels, so that they hold across domains. \"trained on\" says what each saw.", ""]


def _scored_on(result: dict) -> str:
    """' (on 2,000 of dev-v1.1.json's 10,570 ...)' where every rung was scored on the same named sample; else ''."""
    scored = {r.get("scored") for r in result["rungs"]}
    return f" ({scored.pop()})" if len(scored) == 1 and None not in scored else ""


def render_table(result: dict) -> str:
    views, cheapest, points = result["views"], result["cheapest"], result["within_points"]
    teacher, primary, ref = result["teacher"], result["primary_metric"], result["reference_rung"]
    s = result["setting"]
    marks = {}
    for cost, by_view in cheapest.items():
        for view, name in by_view.items():
            if name:
                marks.setdefault(name, []).append(f"{'fastest' if cost == 'latency_ms' else 'smallest'} ({view})")
    lines = [f"# The ladder: {result['ladder']['description'] or 'students from one teacher'}", "",
             f"{result['dataset']} {primary}{_scored_on(result)}; latency: {s['runtime']} {s['model_format']} "
             f"{s['precision']}, "
             f"{s['threads']} thread, batch 1, median; file: the int8 ONNX model bench timed. Kept: the student's "
             f"accuracy over the teacher's on the same data. Marked: the cheapest student within {points:g} point of "
             "the teacher on that data.", "", *_inherited(result)]
    if not result["comparable_latency"]:
        lines += [f"Latencies come from different hosts ({'; '.join(result['hosts'])}): compare them with care.", ""]
    across = [cell for v in views[1:] for cell in (f"on {v}", f"kept on {v}")]
    head = ["rung", "student", f"{primary} in domain", "kept", *across, "latency (ms)",
            f"× faster than {ref}", "file (MB)", "with full vocabulary (MB)", "parameters (M)", "trained on",
            "parity gates", "marked"]
    lines += ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 4) + "---|---|"]
    for r in result["rungs"]:
        parity = r["parity"]
        cells = [r["rung"], r["label"], f"{r['accuracy']:.4f}", _percent(r["kept"]),
                 *[cell for v in views[1:] for cell in (_number(r["cross_domain"].get(v), ".4f"),
                                                        _percent(r["kept_cross_domain"].get(v)))],
                 _number(r["latency_ms"], ".3f") if r["ship"] else "not shipped (control)",
                 _number(r["speedup_vs_reference"], ".1f"), _number(r["size_bytes"], ".1f", 1e6),
                 _number(r.get("size_full_vocabulary_bytes") or (r["size_bytes"] if r["ship"] else None), ".1f", 1e6),
                 _number(r["parameters"], ".2f", 1e6), trained_on(r),
                 f"{parity['passed']}/{parity['models']} passed" if parity else "—", ", ".join(marks.get(r["rung"], []))]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("| teacher | " + " | ".join([
        teacher["name"], f"{teacher['accuracy']:.4f}", "100 %",
        *[cell for v in views[1:] for cell in (_number(teacher["cross_domain"].get(v), ".4f"),
                                                "100 %" if teacher["cross_domain"].get(v) else "—")],
        _number(teacher["latency_ms"], ".3f"),
        "", _number(teacher["size_bytes"], ".1f", 1e6), _number(teacher["size_bytes"], ".1f", 1e6),
        _number(teacher["parameters"], ".2f", 1e6), "", "", ""]) + " |")
    lines += [""]
    for cost, label in (("latency_ms", "fastest"), ("size_bytes", "smallest download")):
        said = [f"{view}: {cheapest[cost][view] or f'none within {points:g} point'}" for view in views]
        lines.append(f"- The {label} student within {points:g} point of the teacher — " + "; ".join(said) + ".")
    lines += ["", "Every number comes from the files listed under `sources` in ladder.json (the stages' manifests, "
              "the rungs' bench/results.json, and compare.json).", "", "![The ladder](ladder.png)", ""]
    return "\n".join(lines)


# Where a point's name goes, in points from it: the first that overlaps no name placed before it (rungs of
# close size and accuracy, like the narrow students and the static one, would otherwise print over each other).
LABEL_OFFSETS = ((5, 4), (5, -11), (-5, 4), (-5, -11), (5, 14), (5, -21), (-5, 14), (-5, -21))


def place_labels(ax) -> list:
    """Move each annotation of `ax` to the first of LABEL_OFFSETS where its box overlaps none placed before it
    (left of the point, it is right-aligned); the last offset tried stays when all overlap. Returns the boxes."""
    ax.figure.canvas.draw()  # an annotation has no box before the figure is laid out once
    renderer = ax.figure.canvas.get_renderer()
    placed = []
    for text in ax.texts:
        for dx, dy in LABEL_OFFSETS:
            text.set_position((dx, dy))
            text.set_horizontalalignment("left" if dx > 0 else "right")
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
        placed.append(box)
    return placed


def kept_axis(ax, teacher_accuracy: float):
    """A right-hand axis on `ax` that reads its accuracy as the share of the teacher's kept (%): in domain and across
    domains, a rung's kept share is read off the same panel as its accuracy."""
    axis = ax.secondary_yaxis("right", functions=(lambda accuracy: 100 * accuracy / teacher_accuracy,
                                                  lambda kept: kept * teacher_accuracy / 100))
    axis.set_ylabel("kept of the teacher (%)")
    return axis


def plot_ladder(result: dict, path: Path) -> Path:
    """Accuracy against int8 latency (top) and int8 file size (bottom), one column per dataset, the share of the
    teacher's accuracy kept on the right-hand axis; the teacher's accuracy less `within_points` as a line; the
    cheapest rung above it starred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views, points, teacher = result["views"], result["within_points"], result["teacher"]
    fig, axes = plt.subplots(len(COSTS), len(views), figsize=(6 * len(views), 4.4 * len(COSTS)), squeeze=False)
    for i, (cost, cost_label) in enumerate(COSTS.items()):
        scale = 1e6 if cost == "size_bytes" else 1.0
        for ax, view in zip(axes[i], views):
            shown = [r for r in result["rungs"] if r[cost] is not None and metric(r, view) is not None]
            marked = result["cheapest"][cost][view]
            for r in shown:
                ax.scatter(r[cost] / scale, metric(r, view), s=160 if r["rung"] == marked else 50,
                           marker="*" if r["rung"] == marked else "o", color="#2a9d8f", edgecolors="black", zorder=3)
                ax.annotate(r["rung"], (r[cost] / scale, metric(r, view)), fontsize=8, xytext=LABEL_OFFSETS[0],
                            textcoords="offset points")
            bar = metric(teacher, view)
            if bar is not None:
                if teacher[cost] is not None:
                    ax.scatter(teacher[cost] / scale, bar, s=50, marker="s", color="#e76f51", zorder=3)
                    ax.annotate("teacher", (teacher[cost] / scale, bar), fontsize=8, xytext=LABEL_OFFSETS[0],
                                textcoords="offset points")
                ax.axhline(bar - points / 100, linestyle="--", color="grey", linewidth=1)
                kept_axis(ax, bar)
            ax.set_xscale("log")
            ax.margins(x=0.12, y=0.08)  # room for the names of the outermost points
            ax.set_xlabel(f"{cost_label}, log scale")
            ax.set_ylabel(f"{result['primary_metric']} {view}")
            ax.set_title(f"{view}: ★ cheapest within {points:g} point of the teacher (dashed)", fontsize=9)
    fig.tight_layout()
    for ax in axes.flat:
        place_labels(ax)
    partial = temp_name(Path(path), "tmp").with_suffix(".png")  # whole or absent, like the other files
    try:
        fig.savefig(partial, dpi=100)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
        plt.close(fig)
    return Path(path)


def read_compare(path: Path) -> dict:
    return read_json_object(path, RunDirError, "run the ladder again", "compare results")


def dumps(result: dict) -> str:
    return json.dumps(result, indent=2) + "\n"

"""The report's plots, drawn from results.json alone. Each function writes one PNG and returns its path,
or None when results hold nothing to draw."""

from __future__ import annotations

from pathlib import Path

from pocketbert.mobile_bench.estimates import derive
from pocketbert.mobile_bench.timing.runners import runtime_text, setting_text

COLOURS = {derive.STUDENT: "#2a9d8f", derive.BERT_BASE: "#8d99ae", derive.TEACHER: "#e9c46a",
           derive.HALF_DEPTH: "#e76f51"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def _setting(m: dict) -> str:
    return f"{runtime_text(m)} {m['precision']}, {setting_text(m)}"


def plot_runtimes(results: dict, path: Path) -> Path | None:
    """Median latency per runtime setting at the headline shape, one bar per model, 95 % interval whiskers."""
    rows = [m for m in derive.headline_rows(results) if m.get("device", derive.HOST) == derive.HOST
            and m["model"] in COLOURS]
    if not rows:
        return None
    plt = _pyplot()
    settings = sorted({_setting(m) for m in rows})
    models = [m for m in COLOURS if any(r["model"] == m for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(settings) * len(models) + 1.5))
    height = 0.8 / len(models)
    labelled = set()
    for j, model in enumerate(models):
        for i, setting in enumerate(settings):
            row = next((r for r in rows if r["model"] == model and _setting(r) == setting), None)
            if row is None:
                continue
            low = row["median_ms"] - row["ci_low_ms"]
            high = row["ci_high_ms"] - row["median_ms"]
            ax.barh(i + j * height, row["median_ms"], height, xerr=[[low], [high]], color=COLOURS[model],
                    label=None if model in labelled else model, capsize=2)
            labelled.add(model)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(settings))], settings, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("median latency, ms (log scale; whiskers: 95 % interval of the median)")
    proto = results["protocol"]
    ax.set_title(f"Measured on {results['host']['cpu']}: batch {proto['batch_size']}, sequence {proto['sequence_length']}",
                 fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_versus(results: dict, path: Path) -> Path | None:
    """One panel per runtime and format: the student beside BERT-base at each precision, measured here at the
    headline shape with the fewest threads."""
    rows = [c for c in results["comparisons"] if c["baseline"] == derive.BERT_BASE and c["device"] == derive.HOST]
    if not rows:
        return None
    threads = min((c["threads"] for c in rows if c["threads"]), default=None)
    rows = [c for c in rows if c["threads"] in (threads, None)]
    panels = sorted({runtime_text(c) for c in rows})
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(2.6 * len(panels) + 1, 3.2), squeeze=False, sharey=True)
    # bars on a log axis start from its lower limit: one shared limit below the fastest keeps them comparable
    lowest = min(min(c["student_ms"], c["baseline_ms"]) for c in rows)
    for ax, panel in zip(axes[0], panels):
        entries = sorted((c for c in rows if runtime_text(c) == panel), key=lambda c: c["precision"])
        for i, c in enumerate(entries):
            ax.bar(i - 0.2, c["student_ms"], 0.4, color=COLOURS[derive.STUDENT],
                   label=derive.STUDENT if i == 0 else None)
            ax.bar(i + 0.2, c["baseline_ms"], 0.4, color=COLOURS[derive.BERT_BASE],
                   label=derive.BERT_BASE if i == 0 else None)
            ax.annotate(f"{c['latency_ratio']:.2f}×", (i - 0.2, c["student_ms"]), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(entries)), [c["precision"] for c in entries], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(panel, fontsize=9)
    axes[0][0].set_ylim(bottom=lowest / 2)
    axes[0][0].set_ylabel("median latency, ms (log)")
    axes[0][0].legend(fontsize=7)
    proto = results["protocol"]
    fig.suptitle(f"Student against BERT-base, same runtime and shape: batch {proto['batch_size']}, sequence "
                 f"{proto['sequence_length']}" + (f", {threads} thread{'s' if threads > 1 else ''}" if threads else "")
                 + " (over each pair: student / BERT-base)", fontsize=9)
    return _save(fig, path)


def _sweep(results: dict, axis: str) -> dict:
    proto = results["protocol"]
    threads = proto["sweep_threads"]
    lines: dict[tuple, list] = {}
    for m in results["measurements"]:
        if m.get("device", derive.HOST) != derive.HOST or m.get("tokenization") != "excluded":
            continue
        if m["runtime"] != "onnxruntime" or m["model_format"] != "onnx" or m.get("threads") != threads:
            continue
        if m["model"] not in (derive.STUDENT, derive.BERT_BASE):
            continue
        if axis == "sequence" and m["batch"] == proto["batch_size"]:
            lines.setdefault((m["model"], m["precision"]), []).append((m["sequence_length"], m["median_ms"]))
        if axis == "batch" and m["sequence_length"] == proto["sequence_length"] and m["precision"] == "fp32":
            lines.setdefault((m["model"], m["precision"]), []).append((m["batch"], m["median_ms"] / m["batch"]))
    return {k: sorted(v) for k, v in lines.items() if len(v) > 1}


def plot_sweep(results: dict, path: Path, axis: str) -> Path | None:
    lines = _sweep(results, axis)
    if not lines:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for (model, precision), points in sorted(lines.items()):
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", color=COLOURS[model], linestyle="-" if precision == "fp32" else "--",
                label=f"{model} {precision}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted({x for pts in lines.values() for x, _ in pts}),
                  [str(x) for x in sorted({x for pts in lines.values() for x, _ in pts})])
    if axis == "sequence":
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("median latency, ms")
    else:
        ax.set_xlabel("batch size")
        ax.set_ylabel("median latency per example, ms")
    ax.set_title(f"onnxruntime, {results['protocol']['sweep_threads']} thread(s), measured on {results['host']['cpu']}",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_variants(results: dict, path: Path) -> Path | None:
    """Accuracy against measured latency for every export variant; the marker's area is the file size."""
    rows = [v for v in results["variants"] if v["latency_ms"] is not None and v["metric"] is not None]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    largest = max(v["size_bytes"] or 1 for v in rows)
    for i, v in enumerate(sorted(rows, key=lambda r: r["latency_ms"])):
        area = 80 + 900 * (v["size_bytes"] or 0) / largest
        ax.scatter(v["latency_ms"], v["metric"], s=area, alpha=0.6, color=COLOURS[derive.STUDENT], edgecolors="k")
        # neighbours often share a latency (the .ort and the int8 .onnx): stagger their labels
        ax.annotate(f"{v['artifact']}, {(v['size_bytes'] or 0) / 1e6:.1f} MB", (v["latency_ms"], v["metric"]),
                    fontsize=7, xytext=(8, 8 + 12 * (i % 3)), textcoords="offset points",
                    arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5})
    teacher = next((m for m in derive.headline_rows(results) if m["model"] == derive.TEACHER
                    and m["runtime"] == "onnxruntime" and m["model_format"] == "onnx" and m["precision"] == "fp32"
                    and m.get("threads") == min(results["protocol"]["threads"])
                    and m.get("device", derive.HOST) == derive.HOST), None)
    if teacher:
        ax.scatter(teacher["median_ms"], results["accuracy"]["teacher"], marker="D", color=COLOURS[derive.TEACHER],
                   edgecolors="k", label="teacher (fp32 .onnx)")
    acc = results["accuracy"]
    if acc["teacher"] is not None:  # an imported student has no teacher
        ax.axhline(acc["teacher"], color=COLOURS[derive.TEACHER], linestyle=":", label=f"teacher {acc['metric']}")
    ax.set_xlabel("median latency measured here, ms (1 thread)")
    ax.set_ylabel(f"{acc['metric']} on its own runtime")
    ax.set_title("Export variants: accuracy, latency and size (marker area)", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _save(fig, path)


def plot_roofline(results: dict, path: Path) -> Path | None:
    """Estimated floors per phone and compute unit for the student and BERT-base; measured points where imported."""
    rows = [e for e in results["estimates"]["devices"] if e["model"] in (derive.STUDENT, derive.BERT_BASE)]
    if not rows:
        return None
    plt = _pyplot()
    groups = sorted({(e["device"], e["compute_unit"], e["precision"]) for e in rows})
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(groups) * 2 + 1.5))
    for i, group in enumerate(groups):
        for j, model in enumerate((derive.STUDENT, derive.BERT_BASE)):
            e = next((r for r in rows if (r["device"], r["compute_unit"], r["precision"]) == group
                      and r["model"] == model), None)
            if e is None:
                continue
            y = i + j * 0.4
            ax.barh(y, e["floor_ms"], 0.4, color=COLOURS[model], alpha=0.5, hatch="//",
                    label=f"{model} floor (estimated)" if i == 0 else None)
            if e["measured_ms"] is not None:
                ax.plot(e["measured_ms"], y, "k^", label="measured on the phone" if i == 0 and j == 0 else None)
    ax.set_yticks([i + 0.2 for i in range(len(groups))], [f"{d} {u} {p}" for d, u, p in groups], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("roofline floor, ms (estimated from FLOPs, bytes and the profile; log scale)")
    proto = results["protocol"]
    ax.set_title(f"Estimated floors at batch {proto['batch_size']}, sequence {proto['sequence_length']}", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, path)


def draw_all(results: dict, folder: Path, names: dict) -> dict:
    drawn = {
        "versus": plot_versus(results, folder / names["versus"]),
        "runtimes": plot_runtimes(results, folder / names["runtimes"]),
        "sequence": plot_sweep(results, folder / names["sequence"], "sequence"),
        "batch": plot_sweep(results, folder / names["batch"], "batch"),
        "variants": plot_variants(results, folder / names["variants"]),
        "roofline": plot_roofline(results, folder / names["roofline"]),
    }
    return {k: v for k, v in drawn.items() if v is not None}

"""report.md and latency.png, rendered from results.json alone: every number here comes from that file."""

from __future__ import annotations

import json
from pathlib import Path

HEADLINE_PRECISION = "fp32"  # the DistilBERT comparison: same precision, same runtime, same shape


def headline(results: dict) -> dict | None:
    rows = [r for r in results["comparisons"] if r["precision"] == HEADLINE_PRECISION]
    if not rows:
        return None
    row = min(rows, key=lambda r: r["threads"])
    kept = results["accuracy"]["fraction_of_teacher_kept"]
    return {**row, "percent_of_teacher_kept": None if kept is None else 100.0 * kept}


def headline_sentence(results: dict) -> str:
    h = headline(results)
    if h is None:
        return "No student/BERT-base pair was measured at the same precision."
    kept = f"{h['percent_of_teacher_kept']:.1f} %" if h["percent_of_teacher_kept"] is not None else "an unknown share"
    return (f"The student is {h['percent_faster']:.0f} % faster and {h['size_ratio']:.1f}× smaller than BERT-base "
            f"and keeps {kept} of its teacher's accuracy "
            f"({h['precision']}, onnxruntime, {h['threads']} thread{'s' if h['threads'] > 1 else ''}, "
            f"batch {results['protocol']['batch_size']}, sequence {results['protocol']['sequence_length']}).")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def render_markdown(results: dict, plot_name: str | None) -> str:
    host, proto, acc = results["host"], results["protocol"], results["accuracy"]
    lines = [
        "# pocketbert latency report",
        "",
        f"**{headline_sentence(results)}**",
        "",
        "\"X % faster\" is BERT-base's median latency over the student's, minus one (the DistilBERT paper's usage); "
        "\"Y× smaller\" compares ONNX file sizes at the same precision.",
        "",
        "## Measured here",
        "",
        f"- Device: {host['cpu']}, {host['cores']} cores, {host['os']} ({', '.join(host['isa_flags']) or 'no listed ISA flags'})",
        f"- Runtime: onnxruntime {results['versions'].get('onnxruntime', '?')}, CPUExecutionProvider",
        f"- Input: batch {proto['batch_size']}, sequence {proto['sequence_length']}, {proto['inputs']}",
        f"- Protocol: {proto['warmup']} warm-up runs, then {proto['repeats']} timed runs; median and p90",
        "",
        "| model | precision | threads | median ms | p90 ms | file size |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for m in results["measurements"]:
        size = results["models"][m["model"]]["files"][m["precision"]]["size_bytes"]
        lines.append(f"| {m['model']} | {m['precision']} | {m['threads']} | {m['median_ms']:.1f} | {m['p90_ms']:.1f} | {_mb(size)} |")
    lines += ["", "## Student against BERT-base", "",
              "| precision | threads | student ms | BERT-base ms | latency ratio | faster | smaller |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for c in results["comparisons"]:
        lines.append(f"| {c['precision']} | {c['threads']} | {c['student_median_ms']:.1f} | {c['bert_base_median_ms']:.1f} "
                     f"| {c['latency_ratio']:.3f} | {c['percent_faster']:.0f} % | {c['size_ratio']:.1f}× |")
    kept = acc["fraction_of_teacher_kept"]
    lines += ["", "## Accuracy", "",
              f"{acc['metric']} on {acc['eval_set']}: student {acc['student']:.4f}, teacher {acc['teacher']:.4f}"
              + (f" ({100 * kept:.1f} % kept)." if kept is not None else "."),
              "", "| exported model | runtime | examples | " + acc["metric"] + " | agreement with the student |",
              "|---|---|---:|---:|---:|"]
    for name, e in acc["exported"].items():
        value = f"{e['value']:.4f}" if e["value"] is not None else "–"
        lines.append(f"| {name} | {e['runtime']} | {e['n_examples']} | {value} | {100 * e['agreement_with_student']:.1f} % |")
    models = results["models"]
    lines += ["", "## Models", ""]
    for name, m in models.items():
        lines.append(f"- **{name}**: {m['num_hidden_layers']} layers, hidden {m['hidden_size']}, "
                     f"{m['num_attention_heads']} heads, FFN {m['intermediate_size']} — {m['description']}")
    if plot_name:
        lines += ["", f"![median latency]({plot_name})"]
    lines += ["", f"Rendered from results.json (git {results.get('git_commit') or 'unknown'})."]
    return "\n".join(lines) + "\n"


def plot_latency(results: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(m["precision"], m["threads"]) for m in results["measurements"]})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for offset, (model, colour) in zip((-width / 2, width / 2), (("student", "#2a9d8f"), ("bert-base", "#8d99ae"))):
        rows = [next((m for m in results["measurements"] if m["model"] == model and (m["precision"], m["threads"]) == g), None)
                for g in groups]
        xs = [i + offset for i, r in enumerate(rows) if r]
        medians = [r["median_ms"] for r in rows if r]
        errors = [r["p90_ms"] - r["median_ms"] for r in rows if r]
        ax.bar(xs, medians, width, yerr=[[0] * len(errors), errors], label=model, color=colour, capsize=3)
    ax.set_xticks(range(len(groups)), [f"{p}\n{t} thread{'s' if t > 1 else ''}" for p, t in groups])
    ax.set_ylabel("median latency, ms (whisker: p90)")
    proto = results["protocol"]
    ax.set_title(f"onnxruntime, batch {proto['batch_size']}, sequence {proto['sequence_length']} — {results['host']['cpu']}",
                 fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(results_path: Path, report_path: Path, plot_path: Path | None) -> Path:
    results = json.loads(Path(results_path).read_text())
    if plot_path is not None:
        plot_latency(results, plot_path)
    report_path.write_text(render_markdown(results, plot_path.name if plot_path else None))
    return report_path

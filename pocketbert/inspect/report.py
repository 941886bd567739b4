"""inspect.md, its plots and a self-contained inspect.html, drawn from inspect.json alone."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np

ROLE_TITLES = {"teacher": "teacher", "student": "student"}
CLUSTER_COLOURS = "tab10"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def number(value, digits: int = 3) -> str:
    """A metric as the report writes it; — where there is none."""
    return "—" if value is None else f"{value:.{digits}f}"


def plot_embeddings(result: dict, name: str, path: Path) -> Path:
    """t-SNE of teacher and student, coloured by gold label (top) and by mixture cluster (bottom)."""
    plt = _plt()
    data = result["datasets"][name]
    gold = np.array(data["gold"])
    labels = result["label_names"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 9))
    for col, role in enumerate(("teacher", "student")):
        model = data["models"][role]
        coords = np.array(model["tsne"])
        for k, label in enumerate(labels):
            chosen = gold == k
            axes[0, col].scatter(coords[chosen, 0], coords[chosen, 1], s=8, alpha=0.7, label=label)
        axes[0, col].set_title(f"{role}: gold label (probe accuracy {number(model['probe']['accuracy'])})")
        axes[1, col].scatter(coords[:, 0], coords[:, 1], c=model["clusters"], s=8, alpha=0.7, cmap=CLUSTER_COLOURS)
        axes[1, col].set_title(f"{role}: {result['clusters_k']} mixture clusters (purity {model['purity']:.3f}, "
                               f"ARI {model['adjusted_rand']:.3f})")
        for ax in axes[:, col]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].legend(markerscale=2, fontsize=8, loc="best")
    fig.suptitle(f"{name}: t-SNE of {data['n_examples']} eval sentence embeddings")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_confusion(result: dict, name: str, path: Path) -> Path:
    plt = _plt()
    data = result["datasets"][name]
    labels = result["label_names"]
    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.1 * len(labels) * 2, 1.5 + 0.9 * len(labels)))
    for ax, role in zip(axes, ("teacher", "student")):
        matrix = np.array(data["models"][role]["confusion"])
        ax.imshow(matrix, cmap="Blues")
        for (g, p), count in np.ndenumerate(matrix):
            ax.text(p, g, str(count), ha="center", va="center",
                    color="white" if count > matrix.max() / 2 else "black", fontsize=8)
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold")
        ax.set_title(f"{role} (accuracy {data['models'][role]['accuracy']:.3f})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_attention(example: dict, path: Path, layer_map: list[int] | None = None) -> Path:
    """Head-averaged attention per layer: the teacher's layers on the first row, the student's on the second, each
    student layer titled with the teacher layer it was cut from."""
    plt = _plt()
    roles = [r for r in ("teacher", "student") if r in example["attention"]]
    width = max(len(example["attention"][r]) for r in roles)
    tokens = example["tokens"]
    fig, axes = plt.subplots(len(roles), width, figsize=(2.6 * width, 2.9 * len(roles)), squeeze=False)
    for row, role in enumerate(roles):
        layers = example["attention"][role]
        for col in range(width):
            ax = axes[row, col]
            if col >= len(layers):
                ax.axis("off")
                continue
            ax.imshow(np.array(layers[col]), cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=5)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=5)
            source = f" (from {layer_map[col] + 1})" if role == "student" and layer_map else ""
            ax.set_title(f"{role} layer {col + 1}{source}", fontsize=8)
    fig.suptitle(f"{example['kind']}: gold {example['gold']}; teacher {example['predicted']['teacher']}, "
                 f"student {example['predicted']['student']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def render(result: dict, folder: Path) -> tuple[str, list[tuple[str, Path]]]:
    """The markdown, and the plots it names (written into folder)."""
    lines = [f"# What the student learned: {result['run']}", ""]
    models = result["models"]
    lines += [f"Teacher: {models['teacher']['description']} ({models['teacher']['embedding']}); student: "
              f"{models['student']['description']} ({models['student']['embedding']}). "
              f"{result['clusters_k']} Gaussian-mixture clusters, t-SNE perplexity {result['perplexity']}, "
              f"seed {result['seed']}; numbers on the eval examples below, the probe on a held-out 30 % of them.", ""]
    plots: list[tuple[str, Path]] = []
    for name, data in result["datasets"].items():
        lines += [f"## {name} ({data['n_examples']} eval examples)", "",
                  "| model | accuracy | linear probe | cluster purity | adjusted Rand | silhouette |",
                  "|---|---:|---:|---:|---:|---:|"]
        for role in ("teacher", "student"):
            m = data["models"][role]
            lines.append(f"| {role} | {m['accuracy']:.4f} | {number(m['probe']['accuracy'], 4)} | {m['purity']:.4f} "
                         f"| {m['adjusted_rand']:.4f} | {number(m['silhouette'], 4)} |")
        lines.append("")
        if data.get("embedding_cka") is not None:
            lines += [f"Linear CKA of the teacher's and the student's sentence embeddings: {data['embedding_cka']:.3f} "
                      "(1: the same geometry up to rotation and scale, whatever the two widths).", ""]
        embedding_plot = plot_embeddings(result, name, folder / f"embeddings-{name}.png")
        plots.append((f"t-SNE of {name}", embedding_plot))
        lines += [f"![t-SNE of {name}]({embedding_plot.name})", ""]
        entropy = {r: data["models"][r]["attention_entropy"] for r in ("teacher", "student")}
        if any(entropy.values()):
            depth = max(len(v or []) for v in entropy.values())
            lines += ["Attention entropy per layer (nats, mean over heads and real query tokens of "
                      f"{max(data['models'][r]['attention_entropy_examples'] for r in entropy)} examples):", "",
                      "| model | " + " | ".join(f"layer {i + 1}" for i in range(depth)) + " |", "|---|" + "---:|" * depth]
            for role, values in entropy.items():
                cells = [f"{v:.3f}" for v in values] if values else ["no attention layers"]
                lines.append(f"| {role} | " + " | ".join(cells + ["—"] * (depth - len(cells))) + " |")
            lines.append("")
        if data.get("mapped_attention"):
            rows = data["mapped_attention"]
            lines += ["Attention of each student layer beside the teacher layer it was cut from (mean total-variation "
                      "distance of head-averaged attention rows over real tokens: 0 the same, 1 disjoint):", "",
                      "| student layer | teacher layer | distance |", "|---:|---:|---:|"]
            lines += [f"| {r['student_layer']} | {r['teacher_layer']} | {r['distance']:.3f} |" for r in rows]
            lines.append("")
        for role in ("teacher", "student"):
            if not models[role]["attends"]:
                lines += [f"The {role} ({models[role]['description']}) has no attention: its section shows the "
                          "embeddings only.", ""]
        confusion_plot = plot_confusion(result, name, folder / f"confusion-{name}.png")
        plots.append((f"confusion matrices on {name}", confusion_plot))
        lines += [f"![confusion matrices on {name}]({confusion_plot.name})", "", "Hardest classes (lowest recall):", ""]
        for role in ("teacher", "student"):
            hardest = "; ".join(f"{h['label']} {h['recall']:.3f} (most often taken for {h['most_confused_with']})"
                                for h in data["models"][role]["hardest_classes"])
            lines.append(f"- {role}: {hardest}")
        lines.append("")
        for i, example in enumerate(data["attention_examples"]):
            if not example["attention"]:
                continue
            attention_plot = plot_attention(example, folder / f"attention-{name}-{i + 1}.png", result.get("layer_map"))
            plots.append((f"attention, {name} example {i + 1}", attention_plot))
            lines += [f"Example {i + 1} ({example['kind']}): \"{example['text']}\"", "",
                      f"![attention, {name} example {i + 1}]({attention_plot.name})", ""]
    lines.append(f"Written by `{result['command']}` in {result['wall_time_s']:.0f} s.")
    return "\n".join(lines) + "\n", plots


def to_html(markdown: str, folder: Path) -> str:
    """The markdown as one self-contained page: tables, headings, paragraphs and the plots embedded."""
    body, table = [], []

    def flush_table():
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= set("-: ")]
            cells = [[html.escape(c.strip()) for c in r.strip().strip("|").split("|")] for r in rows]
            head = "".join(f"<th>{c}</th>" for c in cells[0])
            rest = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells[1:])
            body.append(f"<table><tr>{head}</tr>{rest}</table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.startswith("!["):
            alt, src = line[2:].split("](")
            data = base64.b64encode((folder / src.rstrip(")")).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    flush_table()
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}img{max-width:100%}")
    return f"<!doctype html><meta charset=utf-8><title>inspect</title><style>{style}</style>{''.join(body)}"

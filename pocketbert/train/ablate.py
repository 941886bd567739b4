"""`pocketbert train ablate`: a distillation recipe with each loss removed in turn, and from a random student.

Like Table 4 of Sanh et al. 2019: every variant is a full distillation from the same teacher on the same
data; the table is each variant's dev metric and its change from the full recipe. The variants are the
recipe's own (its class's ablation_variants: DistilBERT's, the layer-wise recipe's); one that would change
nothing (a loss the recipe already weighs 0) is left out. Each variant keeps its student in
<run>/ablation/<variant>/, so a killed ablation continues where it stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocketbert.core.errors import ConfigError, RunDirError
from pocketbert.core.run.manifest import command_line, read_manifest
from pocketbert.core.run.stage_records import StudentRecord
from pocketbert.core.run.atomic_folder import require_stage, write_text_atomically
from pocketbert.core.run.run_files import (
    ABLATION_DIR,
    ABLATION_PLOT,
    ABLATION_RESULTS,
    ABLATION_TABLE,
    MANIFEST,
    STUDENT_DIR,
    TEACHER_DIR,
)
from pocketbert.core.config.recipe import Recipe, recipe_dict, with_overrides
from pocketbert.train import distributed, registry
from pocketbert.train.stage import StageRun, run_stage

FULL = "full"  # every recipe's first variant: the recipe as given


def variant_recipe(recipe: Recipe, changes: dict) -> Recipe:
    return with_overrides(recipe, changes)


def recipe_variants(name: str | None) -> tuple[str, dict]:
    """(the recipe's registered name, its variants: name -> (what the table calls it, the recipe keys it changes))."""
    cls = registry.recipe_class(name, "distill")
    variants = getattr(cls, "ablation_variants", None)
    if not variants:
        with_variants = [n for n in registry.names("distill")
                         if getattr(registry.recipe_class(n, "distill"), "ablation_variants", None)]
        raise ConfigError(f"the {cls.name} recipe has no ablation: run it with --recipe "
                          f"{' or --recipe '.join(with_variants)}")
    return cls.name, variants


def ablate(run_dir: Path, recipe: Recipe, teacher_dir: Path | None = None, data_dir: Path | None = None,
           device: str | None = None, variants: list[str] | None = None) -> dict:
    recipe_name, known = recipe_variants(recipe.distill.recipe)
    # recorded as the distillation records it, so that a finished variant is known again (_done_with)
    recipe = with_overrides(recipe, {"distill.recipe": recipe_name})
    names = variants or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown ablation variant {unknown[0]} of the {recipe_name} recipe: choose from "
                          f"{', '.join(known)}")
    if FULL not in names:
        names = [FULL, *names]
    # a variant that changes nothing (its loss already weighs 0) would only repeat the full recipe
    names = [n for n in names if n == FULL or variant_recipe(recipe, known[n][1]) != recipe]
    run_dir = Path(run_dir)
    teacher_dir = Path(teacher_dir) if teacher_dir else require_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")
    folder = run_dir / ABLATION_DIR
    rows = []
    for name in names:
        label, changes = known[name]
        variant_run = folder / name
        manifest_path = variant_run / STUDENT_DIR / MANIFEST
        specific = variant_recipe(recipe, changes)
        if not _done_with(manifest_path, recipe_dict(specific)):
            run_stage(registry.create(recipe_name), StageRun(variant_run, specific, data_dir,
                                                                     teacher_dir=teacher_dir, device=device,
                                                                     overwrite=True, resume=True))
        student = read_manifest(variant_run / STUDENT_DIR, StudentRecord)
        metrics = student.metrics
        rows.append({"variant": name, "label": label, "changes": changes, "eval": metrics.eval,
                     "primary_metric": metrics.primary_metric, "teacher_eval": metrics.teacher_eval,
                     "wall_time_s": student.wall_time_s})
    primary = rows[0]["primary_metric"]
    full = rows[0]["eval"][primary]
    for row in rows:
        row["delta"] = row["eval"][primary] - full
    result = {"command": command_line(), "recipe_name": recipe_name, "primary_metric": primary,
              "teacher": str(teacher_dir), "teacher_eval": rows[0]["teacher_eval"],
              "recipe": recipe_dict(recipe), "rows": rows, "seconds": round(sum(r["wall_time_s"] for r in rows), 1)}
    if distributed.is_main():  # under torchrun every process holds the same rows; one writes them
        write_text_atomically(folder / ABLATION_RESULTS, json.dumps(result, indent=2) + "\n")
        write_text_atomically(folder / ABLATION_TABLE, render_table(result))
        plot_ablation(result, folder / ABLATION_PLOT)
    distributed.barrier()
    return result


def _done_with(manifest_path: Path, recipe: dict) -> bool:
    """A variant finished earlier with exactly this recipe need not run again."""
    if not manifest_path.is_file():
        return False
    try:
        return read_manifest(manifest_path.parent, StudentRecord).config.recipe == recipe
    except RunDirError:  # a manifest cut short or edited: the variant runs again
        return False


def recipe_title(name: str | None) -> str:
    """What the table calls a recipe: its class's title (an ablation written before recipes were named: the
    default's)."""
    try:
        cls = registry.recipe_class(name, "distill")
        return cls.title or cls.name
    except ConfigError:  # a recipe no longer registered: its name
        return str(name)


def render_table(result: dict) -> str:
    primary = result["primary_metric"]
    teacher = result["teacher_eval"][primary]
    lines = [
        f"# Ablation of the {recipe_title(result.get('recipe_name'))} recipe "
        f"({primary} on the dev set)",
        "",
        f"Teacher: {teacher:.4f}. Each row is a full distillation; Δ is against the first row.",
        "",
        f"| variant | {primary} | Δ (points) |",
        "|---|---:|---:|",
    ]
    for row in result["rows"]:
        delta = "—" if row["variant"] == FULL else f"{100 * row['delta']:+.2f}"
        lines.append(f"| {row['label']} | {row['eval'][primary]:.4f} | {delta} |")
    n = result["rows"][0]["eval"].get("n_examples")
    lines += ["", f"{n} dev examples; the variants took {result['seconds']:.0f} s to distil and evaluate."]
    return "\n".join(lines) + "\n"


def plot_ablation(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"][1:]
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.55 * max(1, len(rows))))
    deltas = [100 * r["delta"] for r in rows]
    bars = ax.barh([r["label"] for r in rows], deltas, color=["#e76f51" if d < 0 else "#2a9d8f" for d in deltas])
    ax.bar_label(bars, labels=[f"{d:+.2f}" for d in deltas], padding=3)
    ax.margins(x=0.15)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel(f"change in dev {result['primary_metric']} (points) against the full recipe")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""`pocketbert train prune`: structured pruning of the student's FFN channels, then a short recovery distillation.

torch-pruning removes the same share of intermediate channels from every layer (the least important by
their weights' L2 norm, with the rows of the output projection they feed), so `intermediate_size` in the
Hugging Face config still describes every layer and the pruned student reloads with from_pretrained.
Attention heads are not pruned: transformers derives a BERT head's width from hidden_size / num_heads, so a
model with fewer heads of the same width has no config that from_pretrained could rebuild it from.

The pruned, recovered student is a run of its own (<run>-pruned by default: teacher/ linked to the original
run's, student/), so `pocketbert export --run <run>-pruned` exports it like any student.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from pocketbert.core.errors import ConfigError, ModelError, require
from pocketbert.core.run.manifest import verified_stage
from pocketbert.core.run.atomic_folder import require_stage
from pocketbert.core.run.run_files import MANIFEST, STUDENT_DIR, TEACHER_DIR
from pocketbert.core.run.user_paths import OUTPUT_MARKER, mark_output, output_folder, recorded_path, refuse_inputs
from pocketbert.core.students import stage_folder
from pocketbert.train import distributed
from pocketbert.core.students.architectures import architecture_of
from pocketbert.core.config.recipe import Recipe, with_overrides


def ffn_layers(model) -> list[tuple[torch.nn.Linear, torch.nn.Linear]]:
    """(up projection, down projection) of every BERT-family FFN."""
    pairs = []
    for module in model.modules():
        up = getattr(getattr(module, "intermediate", None), "dense", None)
        down = getattr(getattr(module, "output", None), "dense", None)
        if isinstance(up, torch.nn.Linear) and isinstance(down, torch.nn.Linear) and up.out_features == down.in_features:
            pairs.append((up, down))
    return pairs


def prune_ffn(model, ratio: float, round_to: int = 8) -> dict:
    """Remove `ratio` of every FFN's channels in place; returns what changed. The config follows."""
    tp = require("torch_pruning", "train")
    if not 0.0 < ratio < 1.0:
        raise ConfigError(f"prune.ffn_ratio must be between 0 and 1 (got {ratio}); 0.5 halves every FFN")
    pairs = ffn_layers(model)
    if not pairs:
        raise ModelError(f"found no BERT-style FFN (intermediate.dense / output.dense) in a {type(model).__name__}")
    before = model.config.intermediate_size
    keep = {up for up, _ in pairs}
    ignored = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m not in keep]
    embeddings = model.get_input_embeddings()
    example = {"input_ids": torch.randint(5, embeddings.num_embeddings, (1, 12)),
               "attention_mask": torch.ones(1, 12, dtype=torch.long)}
    pruner = tp.pruner.MetaPruner(
        model, example_inputs=example, importance=tp.importance.GroupMagnitudeImportance(p=2), pruning_ratio=ratio,
        ignored_layers=[*ignored, embeddings], global_pruning=False, round_to=round_to,
        output_transform=lambda out: sum(v.float().sum() for v in out.values() if torch.is_tensor(v)),
    )
    model.eval()
    pruner.step()
    sizes = {up.out_features for up, _ in pairs}
    if len(sizes) != 1:
        raise ModelError(f"pruning left FFNs of different widths {sorted(sizes)}: no single config describes them")
    model.config.intermediate_size = sizes.pop()
    return {"intermediate_size_before": before, "intermediate_size_after": model.config.intermediate_size,
            "layers": len(pairs)}


MADE_BY = "train prune"  # the marker of a pruned run: a later prune may write its student again (--overwrite)


def prune_student(run_dir: Path, recipe: Recipe, out_run: Path | None = None, data_dir: Path | None = None,
                  device: str | None = None, overwrite: bool = False,
                  teacher_dir: Path | None = None) -> tuple[Path, dict]:
    """Prune the run's student and recover it by distillation into <out_run>/student; the recovery's manifest
    records what was cut (metrics.pruning)."""
    from pocketbert.train import registry
    from pocketbert.train.stage import StageRun, run_stage

    cfg = recipe.prune
    run_dir = Path(run_dir)
    student_dir, student_manifest = verified_stage(run_dir, STUDENT_DIR, "pocketbert train distill")
    if teacher_dir is None:  # the teacher the student was distilled from, wherever it lives
        recorded = student_manifest.config.teacher
        recorded = recorded_path(run_dir, recorded) if recorded else None  # absolute, or relative to the run
        teacher_dir = recorded if recorded and (recorded / MANIFEST).is_file() else None
    teacher_dir = Path(teacher_dir) if teacher_dir else require_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")
    out_run = Path(out_run) if out_run else run_dir.parent / f"{run_dir.name}-pruned"
    # the pruned student's folder must not replace what pruning reads (--out-run equal to --run, say)
    refuse_inputs(out_run / STUDENT_DIR, "train prune", [student_dir, teacher_dir], "--out-run")
    output_folder(out_run, MADE_BY, overwrite, makes_run=True, option="--out-run")  # never a user's folder
    student, tokenizer, task, info = stage_folder.load_stage_model(student_dir)
    architecture = architecture_of(info)
    if not architecture.supports_pruning:
        raise ConfigError(f"prune removes FFN channels of transformer students; a {architecture.name} student has "
                          "none: prune a student of the distilbert recipe")
    before = sum(p.numel() for p in student.parameters())
    change = prune_ffn(student, cfg.ffn_ratio, cfg.round_to)
    change["parameters_before"], change["parameters_after"] = before, sum(p.numel() for p in student.parameters())
    with tempfile.TemporaryDirectory(prefix="pocketbert-pruned-") as tmp:
        stage_folder.save_stage_model(student, tokenizer, Path(tmp), task, int(info["max_length"]),
                                {"doc_stride": info.get("doc_stride")})
        # the pruned weights must rebuild from the config alone, or no app tool could load them
        stage_folder.load_stage_model(Path(tmp))
        # the recovery starts from the pruned checkpoint: the shape a narrow run's recipe cut it to is its own now
        recovery = with_overrides(recipe, {
            "student.model": tmp, "student.layers": None, "student.hidden_size": None, "student.heads": None,
            "student.intermediate_size": None, "distill.epochs": cfg.recovery_epochs,
            "distill.max_train_examples": cfg.recovery_max_train_examples}, "train prune", keep_none=True)
        path, result = run_stage(registry.create(registry.DISTILBERT), StageRun(
            out_run, recovery, data_dir, teacher_dir=teacher_dir, device=device, overwrite=overwrite,
            metrics={"pruning": change}))
    if distributed.is_main() and not (out_run / OUTPUT_MARKER).is_file():
        mark_output(out_run, MADE_BY)
    return path, {**result, "pruning": change}

"""`pocketbert train distill --recipe tang`: Tang et al. 2019, BERT into a BiLSTM.

Transfer set: the training examples, the recipe's transfer data (transfer.py), and augmented copies of both
(augment.py), every one labelled by the teacher.
Loss: alpha * hard-label loss (original examples only) + (1 - alpha) * MSE(student logits, teacher logits);
alpha = 0, pure distillation, was the paper's best.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch.nn.functional as F

from pocketbert.errors import ConfigError
from pocketbert.manifest import sha256_of, write_manifest
from pocketbert.rundir import STUDENT_DIR, check_writable, staged_output
from pocketbert.user_paths import record_path
from pocketbert.core import bilstm, losses, stage_folder
from pocketbert.core.architectures import BILSTM
from pocketbert.train import checkpoint, distributed, teacher_cache, trainer, transfer
from pocketbert.core.data import subsample
from pocketbert.train.distill import (
    cross_domain_eval,
    evaluate_against_teacher,
    freeze,
    load_teacher_and_data,
)

RECIPE = "tang"


def transfer_set_report(n_labelled: int, n_extra: int, rows_report: dict) -> dict:
    """The transfer set's make-up: labelled originals, transfer data, and rewrites of both."""
    augmentation = rows_report.get("augmentation") or {}
    return {"originals": n_labelled, "transfer_data": (rows_report.get("transfer_data") or {}).get("rows", 0),
            "augmented": augmentation.get("augmented", 0), "rows": n_labelled + n_extra,
            "duplicates_dropped": augmentation.get("duplicates_dropped", 0), "tagger": augmentation.get("tagger")}


def check_tang_config(cfg: dict) -> float:
    alpha = float(cfg["alpha"])
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"distill.alpha must be between 0 (pure distillation) and 1 (labels only); got {alpha}")
    return alpha


def distill_bilstm(
    run_dir: Path,
    recipe: dict,
    teacher_dir: Path | None = None,
    data_dir: Path | None = None,
    eval_file: Path | None = None,
    device: str | None = None,
    overwrite: bool = False,
    resume: bool = False,
) -> tuple[Path, dict]:
    started = time.time()
    check_writable(run_dir, STUDENT_DIR, overwrite)
    seed = int(recipe["seed"])
    cfg, eval_cfg = recipe["distill"], recipe["eval"]
    alpha = check_tang_config(cfg)
    transfer.check_recipe(recipe, augments_by_default=True)
    hard_loss = losses.hard_label_loss(cfg)
    teacher, tokenizer, task, teacher_dir, data = load_teacher_and_data(run_dir, recipe, teacher_dir, data_dir,
                                                                        eval_file, seed)
    if task.per_token_outputs:
        raise ConfigError("the BiLSTM student classifies sentences: use --recipe distilbert for QA")
    trainer.set_seed(seed)
    student = bilstm.build_bilstm(recipe.get("bilstm") or {}, teacher, tokenizer, len(task.label_names))
    dev = trainer.pick_device(device)
    freeze(teacher, dev)
    length = int(cfg["max_length"])

    with distributed.main_writes(run_dir, staged_output(run_dir, STUDENT_DIR, overwrite)) as out:
        originals = trainer.labelled_examples(data, cfg, seed)
        extra, rows_report = transfer.unlabeled_rows(task, tokenizer, recipe, data, originals, data_dir, seed,
                                                     augments_by_default=True)
        labelled_features = task.features(tokenizer, originals, length)
        extra_features = task.features(tokenizer, extra, length) if extra else []
        eval_examples = subsample(data.eval, eval_cfg.get("max_examples"), seed)
        eval_features = task.features(tokenizer, eval_examples, length)
        teacher_sha = sha256_of(teacher_dir)
        cached, cache_report, extra_cache_report = teacher_cache.labelled_and_unlabeled(
            teacher, task, labelled_features, extra_features, tokenizer.pad_token_id, None, teacher_sha, dev,
            cfg["teacher_cache_mb"], int(eval_cfg["batch_size"]))
        if cached is None:
            reason = next(r["reason"] for r in (cache_report, extra_cache_report) if r and not r["used"])
            raise ConfigError(f"the Tang recipe labels its transfer set once, through the teacher cache: "
                              f"{reason}; raise distill.teacher_cache_mb")
        features = labelled_features + extra_features

        def step_loss(forward_model, batch):
            t_logits, _ = teacher_cache.teacher_targets(batch)
            s_logits = forward_model(batch["input_ids"], batch["attention_mask"]).logits.float()
            parts = {"mse": F.mse_loss(s_logits, t_logits)}
            if alpha:
                parts["ce"] = task.hard_loss(s_logits, batch, hard_loss)
            loss = (1.0 - alpha) * parts["mse"] + alpha * parts.get("ce", 0.0)
            return loss, parts

        spec = trainer.checkpoint_spec_for(run_dir, STUDENT_DIR, cfg, {
            "cfg": cfg, "seed": seed, "recipe": RECIPE, "bilstm": recipe.get("bilstm"), "teacher": teacher_sha,
        }, features, resume)
        stats = trainer.train(student, task, features, tokenizer.pad_token_id, cfg, dev, step_loss, seed,
                              "distill (BiLSTM)", spec,
                              batch_extras=lambda idx, length: cached.as_batch(idx, length, dev))
        metrics, teacher_metrics, kept = evaluate_against_teacher(
            student, teacher, teacher_dir, task, eval_examples, eval_features, tokenizer.pad_token_id, eval_cfg, dev)
        cross_domain = cross_domain_eval(student, teacher, task, tokenizer, recipe, data_dir, dev)
        if out is not None:  # process 0 alone writes the stage
            stage_folder.save_stage_model(student, tokenizer, out, task, length, {"recipe": RECIPE}, architecture=BILSTM)
            write_manifest(
                out, stage="student", started=started,
                config={"recipe": recipe, "seed": seed, "teacher": record_path(run_dir, teacher_dir), "distill_recipe": RECIPE,
                        "device": str(dev), "dataset": data.name},
                inputs={"teacher": teacher_dir, **{f"data_{k}": v for k, v in data.sources.items()},
                        **transfer.file_inputs(recipe)},
                metrics={
                    "eval": metrics, "teacher_eval": teacher_metrics, "primary_metric": task.primary_metric,
                    "fraction_of_teacher_kept": kept, "cross_domain": cross_domain, "train": stats,
                    "transfer_set": transfer_set_report(len(originals), len(extra), rows_report),
                    **rows_report, "teacher_cache": cache_report,
                    **({"teacher_cache_unlabeled": extra_cache_report} if extra_cache_report else {}),
                    "parameters": student.parameter_count(include_embeddings=True),
                    "parameters_without_embeddings": student.parameter_count(),
                    "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
                },
            )
    if distributed.is_main():
        checkpoint.discard(spec)
    return Path(run_dir) / STUDENT_DIR, {"eval": metrics, "teacher_eval": teacher_metrics, "kept": kept,
                                         "cross_domain": cross_domain,
                                         "transfer_data": rows_report.get("transfer_data")}

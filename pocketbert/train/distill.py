"""`pocketbert train distill`: the DistilBERT recipe, task-specific.

Student: half the teacher's layers, initialised from every other teacher layer, embeddings and head copied.
Loss: kl_weight * T² * KL(teacher/T || student/T) + ce_weight * CE(labels) + cos_weight * (1 - cos(hidden states)).
Rows without a gold label (transfer data, rewrites when distill.augment is on) take the soft losses alone.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from pocketbert.errors import ConfigError
from pocketbert.manifest import read_manifest, sha256_of, write_manifest
from pocketbert.rundir import (
    MANIFEST,
    STUDENT_DIR,
    TEACHER_DIR,
    check_writable,
    require_stage,
    stage_path,
    staged_output,
)
from pocketbert.user_paths import record_path, refuse_inputs
from pocketbert.core import losses, models, stage_folder
from pocketbert.train import checkpoint, distributed, teacher_cache, trainer, transfer
from pocketbert.core.data import check_cross_domain, subsample
from pocketbert.core.task_data import load_task_data
from pocketbert.core.recipe import check_class_weights, cross_domain_datasets
from pocketbert.train.student import build_student


def aligned_teacher_layers(n_student: int, n_teacher: int) -> list[int]:
    """For student hidden state k (1..n_student), the teacher hidden state it is pulled towards, ending on the last."""
    return [round(k * n_teacher / n_student) for k in range(1, n_student + 1)]


def check_distill_config(cfg: dict) -> None:
    if float(cfg["temperature"]) <= 0:
        raise ConfigError(f"temperature must be > 0 (got {cfg['temperature']}); 2 to 4 is usual")
    weights = [float(cfg.get(k, 0.0)) for k in ("kl_weight", "ce_weight", "cos_weight")]
    if any(w < 0 for w in weights) or sum(weights) == 0:
        raise ConfigError("loss weights kl_weight, ce_weight, cos_weight must be >= 0 and not all 0")


def leaves_parameters_unused(task, weights: dict) -> bool:
    """Whether some student parameters get no gradient: QA's pooler always; the pooler and classifier when no
    loss reads the logits (a cosine-only distillation). DDP must then look for them every step."""
    return task.head_skips_pooler or not (weights["kl"] or weights["ce"])


def load_teacher_and_data(run_dir: Path, recipe: dict, teacher_dir: Path | None, data_dir: Path | None,
                          eval_file: Path | None, seed: int):
    """The run's (or the given) teacher with its tokenizer and task, and the recipe's data in its label order."""
    teacher_dir = Path(teacher_dir) if teacher_dir else require_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")
    # the student folder this stage writes must not be, hold or lie in the teacher it reads (--teacher R/student)
    refuse_inputs(stage_path(run_dir, STUDENT_DIR), "train distill", [teacher_dir], "--run")
    teacher, tokenizer, task, info = stage_folder.load_stage_model(teacher_dir)
    if info["task"] != recipe["task"]:
        raise ConfigError(f"the teacher in {teacher_dir} is a {info['task']} model: pass --task {info['task']}")
    data = load_task_data(recipe["dataset"], recipe["task"], data_dir, eval_file, task.label_names or None, seed)
    task.check_label_names(data.label_names, f"dataset '{data.name}'")
    # Checks that need the classes, made before the student trains rather than after.
    check_class_weights(recipe["distill"], task.label_names, "distill")
    check_cross_domain(cross_domain_datasets(recipe), task.name, task.label_names)
    return teacher, tokenizer, task, teacher_dir, data


def evaluate_against_teacher(student, teacher, teacher_dir: Path, task, eval_examples, eval_features, pad_id: int,
                             eval_cfg: dict, dev) -> tuple[dict, dict, float | None]:
    """Student metrics, the teacher's on the same examples (from its manifest when it has them), and the kept fraction."""
    metrics = trainer.evaluate(student, task, eval_examples, eval_features, pad_id, eval_cfg, dev, "student eval")
    teacher_manifest = read_manifest(teacher_dir) if (teacher_dir / MANIFEST).is_file() else {}
    teacher_metrics = (teacher_manifest.get("metrics") or {}).get("eval")
    if teacher_metrics is None or teacher_metrics.get("n_examples") != metrics["n_examples"]:
        teacher_metrics = trainer.evaluate(teacher, task, eval_examples, eval_features, pad_id, eval_cfg, dev,
                                           "teacher eval")
    primary = task.primary_metric
    kept = metrics[primary] / teacher_metrics[primary] if teacher_metrics[primary] else None
    return metrics, teacher_metrics, kept


def cross_domain_eval(student, teacher, task, tokenizer, recipe: dict, data_dir: Path | None, dev) -> dict:
    """Student and teacher on the eval split of every dataset in `eval.cross_domain` (train on one, test on others).

    eval.cross_domain is a list of dataset names, or a mapping from the training dataset to such a list.
    """
    eval_cfg = recipe["eval"]
    names = cross_domain_datasets(recipe)
    if not names:
        return {}
    seed = int(recipe["seed"])
    n = eval_cfg["cross_domain_max_examples"]
    length = int(recipe["distill"]["max_length"])
    results = {}
    for name in names:
        other = load_task_data(name, task.name, data_dir, None, task.label_names or None, seed)
        task.check_label_names(other.label_names, f"eval.cross_domain dataset '{name}'")
        examples = subsample(other.eval, n, seed)
        features = task.features(tokenizer, examples, length, recipe["distill"].get("doc_stride"))
        results[name] = {
            "student": trainer.evaluate(student, task, examples, features, tokenizer.pad_token_id, eval_cfg, dev,
                                        f"student on {name}"),
            "teacher": trainer.evaluate(teacher, task, examples, features, tokenizer.pad_token_id, eval_cfg, dev,
                                        f"teacher on {name}"),
        }
    return results


def pretrained_student(source: str, teacher, teacher_tokenizer, task, aligns_hidden: bool):
    """A student loaded from a checkpoint (a fresh task head) rather than cut from the teacher; it must read the
    teacher's token ids, and align hidden states only when its width is the teacher's."""
    resolved = models.resolve_model_source(source)
    student_tokenizer = models.load_tokenizer(resolved)
    if student_tokenizer.get_vocab() != teacher_tokenizer.get_vocab():
        raise ConfigError(f"student '{source}' has another vocabulary than the teacher ({len(student_tokenizer)} vs "
                          f"{len(teacher_tokenizer)} tokens): pick a student that shares the teacher's tokenizer, "
                          "or leave student.model unset to cut one from the teacher")
    student = models.load_for_task(resolved, task)
    if aligns_hidden and student.config.hidden_size != teacher.config.hidden_size:
        raise ConfigError(f"student hidden size {student.config.hidden_size} differs from the teacher's "
                          f"{teacher.config.hidden_size}, so hidden states cannot be aligned: set --cos-weight 0")
    return student, None


def freeze(teacher, dev):
    teacher.to(dev).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)


def distillation_loss(task, teacher, cached, weights: dict, temperature: float, targets: list[int], hard_loss, dev):
    """(step_loss(forward_model, batch), batch_extras) of the DistilBERT recipe: teacher outputs from `cached`
    (put into each batch by batch_extras) when given, else from the teacher inside every step."""
    need_hidden = weights["cos"] > 0

    def teacher_step(inputs, batch):
        if cached is not None:
            return teacher_cache.teacher_targets(batch)
        with torch.no_grad():
            out = teacher(**inputs, output_hidden_states=need_hidden)
        return task.logits(out), [out.hidden_states[k] for k in targets] if need_hidden else None

    def step_loss(forward_model, batch):
        inputs = trainer.model_inputs(task, batch)
        t_logits, t_hidden = teacher_step(inputs, batch)
        s_out = forward_model(**inputs, output_hidden_states=need_hidden)
        s_logits = task.logits(s_out)
        parts = {}
        if weights["kl"]:
            parts["kl"] = task.soft_loss(s_logits, t_logits, batch, temperature)
        if weights["ce"]:
            parts["ce"] = task.hard_loss(s_logits, batch, hard_loss)
        if weights["cos"]:
            parts["cos"] = losses.hidden_cosine_loss(list(s_out.hidden_states[1:]), t_hidden, batch["attention_mask"])
        loss = sum(weights[k] * v for k, v in parts.items())
        return loss, parts

    extras = None if cached is None else (lambda idx, length: cached.as_batch(idx, length, dev))
    return step_loss, extras


def distill_student(
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
    check_distill_config(cfg)
    transfer.check_recipe(recipe, augments_by_default=False)
    teacher, tokenizer, task, teacher_dir, data = load_teacher_and_data(run_dir, recipe, teacher_dir, data_dir,
                                                                        eval_file, seed)
    trainer.set_seed(seed)
    weights = {k: float(cfg.get(f"{k}_weight", 0.0)) for k in ("kl", "ce", "cos")}
    student_cfg = recipe.get("student") or {}
    if student_cfg.get("model"):
        student, layer_map = pretrained_student(student_cfg["model"], teacher, tokenizer, task, weights["cos"] > 0)
    else:
        student, layer_map = build_student(teacher, student_cfg.get("layer_map"))
        if student_cfg["init"] == "random":  # the ablation's control: no teacher weights
            student.apply(student._init_weights)
    dev = trainer.pick_device(device)
    freeze(teacher, dev)
    n_teacher, n_student = models.layer_count(teacher.config), models.layer_count(student.config)
    targets = aligned_teacher_layers(n_student, n_teacher)
    temperature = float(cfg["temperature"])
    need_hidden = weights["cos"] > 0
    hard_loss = losses.hard_label_loss(cfg)

    with distributed.main_writes(run_dir, staged_output(run_dir, STUDENT_DIR, overwrite)) as out:
        eval_examples, features, eval_features = trainer.prepare_features(task, tokenizer, data, cfg, eval_cfg, seed)
        extra, rows_report = transfer.unlabeled_rows(task, tokenizer, recipe, data,
                                                     trainer.labelled_examples(data, cfg, seed), data_dir, seed,
                                                     augments_by_default=False)
        extra_features = task.features(tokenizer, extra, int(cfg["max_length"]), cfg.get("doc_stride")) if extra else []

        teacher_sha = sha256_of(teacher_dir)
        cached, cache_report, extra_cache_report = teacher_cache.labelled_and_unlabeled(
            teacher, task, features, extra_features, tokenizer.pad_token_id, targets if need_hidden else None,
            teacher_sha, dev, cfg["teacher_cache_mb"], int(eval_cfg["batch_size"]))
        features = features + extra_features

        step_loss, extras = distillation_loss(task, teacher, cached, weights, temperature, targets, hard_loss, dev)

        spec = trainer.checkpoint_spec_for(run_dir, STUDENT_DIR, cfg, {
            "cfg": cfg, "seed": seed, "layer_map": layer_map, "student": student_cfg, "teacher": teacher_sha,
        }, features, resume)
        stats = trainer.train(student, task, features, tokenizer.pad_token_id, cfg, dev, step_loss, seed, "distill",
                              spec, unused_parameters=leaves_parameters_unused(task, weights), batch_extras=extras)
        metrics, teacher_metrics, kept = evaluate_against_teacher(
            student, teacher, teacher_dir, task, eval_examples, eval_features, tokenizer.pad_token_id, eval_cfg, dev)
        cross_domain = cross_domain_eval(student, teacher, task, tokenizer, recipe, data_dir, dev)
        if out is not None:  # process 0 alone writes the stage
            stage_folder.save_stage_model(student, tokenizer, out, task, int(cfg["max_length"]),
                                    {"doc_stride": cfg.get("doc_stride"), "layer_map": layer_map})
            write_manifest(
                out, stage="student", started=started,
                config={"recipe": recipe, "seed": seed, "teacher": record_path(run_dir, teacher_dir), "layer_map": layer_map,
                        "aligned_teacher_layers": targets, "device": str(dev), "dataset": data.name},
                inputs={"teacher": teacher_dir, **{f"data_{k}": v for k, v in data.sources.items()},
                        **transfer.file_inputs(recipe)},
                metrics={
                    "eval": metrics, "teacher_eval": teacher_metrics, "primary_metric": task.primary_metric,
                    "fraction_of_teacher_kept": kept, "cross_domain": cross_domain, "train": stats, "teacher_cache": cache_report,
                    **rows_report, **({"teacher_cache_unlabeled": extra_cache_report} if extra_cache_report else {}),
                    "parameters": sum(p.numel() for p in student.parameters()),
                    "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
                },
            )
    if distributed.is_main():
        checkpoint.discard(spec)
    return Path(run_dir) / STUDENT_DIR, {"eval": metrics, "teacher_eval": teacher_metrics, "kept": kept,
                                         "cross_domain": cross_domain,
                                         "transfer_data": rows_report.get("transfer_data")}

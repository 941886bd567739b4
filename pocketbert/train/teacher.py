"""`pocketbert train teacher`: fine-tune a BERT-family checkpoint for the task."""

from __future__ import annotations

import time
from pathlib import Path

from pocketbert.errors import ConfigError
from pocketbert.manifest import write_manifest
from pocketbert.rundir import TEACHER_DIR, check_writable, staged_output
from pocketbert.core import losses, models, stage_folder
from pocketbert.train import checkpoint, distributed, trainer
from pocketbert.core.task_data import load_task_data
from pocketbert.core.recipe import check_class_weights
from pocketbert.core.tasks import make_task


def check_max_length(model, max_length: int) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and max_length > limit:
        raise ConfigError(f"max_length {max_length} exceeds the model's {limit} positions: lower it in the recipe")


def fine_tune_teacher(
    run_dir: Path,
    recipe: dict,
    model_name: str,
    data_dir: Path | None = None,
    eval_file: Path | None = None,
    label_names: list[str] | None = None,
    device: str | None = None,
    overwrite: bool = False,
    trust_remote_code: bool = False,
    resume: bool = False,
) -> tuple[Path, dict]:
    started = time.time()
    check_writable(run_dir, TEACHER_DIR, overwrite)
    seed = int(recipe["seed"])
    cfg, eval_cfg = recipe["teacher"], recipe["eval"]
    data = load_task_data(recipe["dataset"], recipe["task"], data_dir, eval_file, label_names, seed)
    task = make_task(recipe["task"], data.label_names)
    check_class_weights(cfg, task.label_names, "teacher")
    source = models.resolve_model_source(model_name)
    tokenizer = models.load_tokenizer(source, trust_remote_code)
    trainer.set_seed(seed)
    model = models.load_for_task(source, task, trust_remote_code=trust_remote_code)
    check_max_length(model, int(cfg["max_length"]))
    dev = trainer.pick_device(device)
    hard_loss = losses.hard_label_loss(cfg)

    with distributed.main_writes(run_dir, staged_output(run_dir, TEACHER_DIR, overwrite)) as out:
        eval_examples, features, eval_features = trainer.prepare_features(task, tokenizer, data, cfg, eval_cfg, seed)

        def step_loss(forward_model, batch):
            loss = task.hard_loss(task.logits(forward_model(**trainer.model_inputs(task, batch))), batch, hard_loss)
            return loss, {}

        spec = trainer.checkpoint_spec_for(run_dir, TEACHER_DIR, cfg, {
            "cfg": cfg, "seed": seed, "base_model": model_name, "labels": task.label_names}, features, resume)
        stats = trainer.train(model, task, features, tokenizer.pad_token_id, cfg, dev, step_loss, seed, "teacher",
                              spec)
        metrics = trainer.evaluate(model, task, eval_examples, eval_features, tokenizer.pad_token_id, eval_cfg, dev,
                                   "teacher eval")
        if out is not None:  # process 0 alone writes the stage
            stage_folder.save_stage_model(model, tokenizer, out, task, int(cfg["max_length"]),
                                    {"doc_stride": cfg.get("doc_stride"), "base_model": model_name})
            write_manifest(
                out, stage="teacher", started=started,
                config={"recipe": recipe, "seed": seed, "base_model": model_name, "device": str(dev), "dataset": data.name,
                        "trust_remote_code": trust_remote_code},
                inputs={f"data_{k}": v for k, v in data.sources.items()},
                metrics={"eval": metrics, "train": stats, "parameters": sum(p.numel() for p in model.parameters())},
            )
    if distributed.is_main():
        checkpoint.discard(spec)
    final = Path(run_dir) / TEACHER_DIR
    return final, metrics

"""`pocketbert import`: a run directory whose student is a checkpoint the user already has (a Hugging Face folder
or hub name), evaluated on a dataset, so that export, bench and the app folders work on it unchanged.

The checkpoint must already carry the task's head: a classifier whose labels (config.json's id2label) are the
dataset's, or a question-answering span head. Loading follows the same rules as every stage: safetensors or
torch.load(weights_only=True), and no model code unless trust_remote_code is asked for.
"""

from __future__ import annotations

import time
from pathlib import Path

from pocketbert.core.students import models, stage_folder
from pocketbert.core.students.architectures import BERT_FAMILY, check_bert_family
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.students.inference import batched_logits, torch_forward
from pocketbert.core.config.recipe import Recipe, recipe_dict
from pocketbert.core.tasks.registry import make_task
from pocketbert.core.errors import ModelError
from pocketbert.core.run.manifest import write_manifest
from pocketbert.core.run.atomic_folder import check_writable, staged_output
from pocketbert.core.run.run_files import STUDENT_DIR

def _check_head(loading_info: dict, task, source: str) -> None:
    """Refuse a checkpoint whose task head transformers had to create: it would answer at random."""
    # A pooler that is not saved is not part of the head (span heads read token states and skip it).
    missing = [key for key in loading_info.get("missing_keys", []) if "pooler" not in key.split(".")]
    if missing:
        raise ModelError(f"'{source}' has no trained {task.name} head ({len(missing)} weights missing, e.g. "
                         f"{missing[0]}): import a checkpoint fine-tuned for {task.name}, or fine-tune it with "
                         "`pocketbert train teacher`")


def import_student(source: str, task_name: str, run_dir: Path, recipe: Recipe, data_dir: Path | None = None,
                   trust_remote_code: bool = False, overwrite: bool = False) -> tuple[Path, dict]:
    """Load, check and evaluate the checkpoint; write it as <run>/student with the manifest a distilled one has."""
    started = time.time()
    check_writable(run_dir, STUDENT_DIR, overwrite)
    source = models.resolve_model_source(source)
    models.quiet_transformers()
    config = _load_config(source, trust_remote_code)
    check_bert_family(config, source)
    tokenizer = models.load_tokenizer(source, trust_remote_code=trust_remote_code)
    task = make_task(task_name, make_task(task_name).checkpoint_labels(config))
    model, loading_info = _load_with_info(source, task, trust_remote_code)
    _check_head(loading_info, task, source)
    model.eval()
    data = load_task_data(recipe.dataset, task.name, data_dir, None, task.label_names or None, recipe.seed)
    task.check_label_names(data.label_names, f"dataset '{data.name}'")
    distill_cfg, eval_cfg = recipe.distill, recipe.eval
    max_length = min(distill_cfg.max_length, int(getattr(config, "max_position_embeddings", 512)))
    doc_stride = distill_cfg.doc_stride
    features = task.features(tokenizer, data.eval, max_length, doc_stride)
    logits = batched_logits(task, features, tokenizer.pad_token_id, eval_cfg.batch_size,
                            torch_forward(model, task), "eval")
    metrics = task.score(data.eval, features, logits, eval_cfg)
    with staged_output(run_dir, STUDENT_DIR, overwrite) as out:
        extra = {"doc_stride": doc_stride} if doc_stride else None
        stage_folder.save_stage_model(model, tokenizer, out, task, max_length, extra, BERT_FAMILY)
        write_manifest(
            out, stage="student", started=started,
            config={"recipe": recipe_dict(recipe), "dataset": data.name, "imported_from": source},
            inputs={**({"model": Path(source)} if Path(source).is_dir() else {}),
                    **{f"data_{k}": v for k, v in data.sources.items()}},
            metrics={"eval": metrics, "teacher_eval": None, "primary_metric": task.primary_metric,
                     "fraction_of_teacher_kept": None, "parameters": sum(p.numel() for p in model.parameters())},
        )
    return Path(run_dir) / STUDENT_DIR, metrics


def _load_config(source: str, trust_remote_code: bool):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the config of '{source}' ({exc}); pass a Hugging Face folder or hub "
                         "name") from exc


def _load_with_info(source: str, task, trust_remote_code: bool):
    """The model with its head as saved, and transformers' report of which weights it had to create."""
    return models.from_pretrained(task.auto_model_class(), source, task, trust_remote_code,
                                  output_loading_info=True)

"""Stage folders: a teacher/ or student/ checkpoint saved with what a later stage needs to rebuild it (the task,
its labels, the training length, the architecture), and read back from disk alone.

It sits above core/students/models.py (loading a checkpoint) and core/students/architectures.py (how each architecture
loads and saves), which therefore need not know about each other's callers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pocketbert.core.students.architectures import BERT_FAMILY, architecture_of
from pocketbert.core.files import read_json, read_json_object
from pocketbert.core.students.models import load_tokenizer, quiet_transformers
from pocketbert.core.tasks.registry import TASKS, make_task
from pocketbert.core.errors import ModelError
from pocketbert.core.run.run_files import LABELS, MODEL_CONFIG, TASK_INFO


def save_stage_model(model, tokenizer, folder: Path, task, max_length: int, extra: dict[str, Any] | None = None,
                     architecture=None) -> None:
    """Weights (safetensors) + tokenizer + what a later stage needs to rebuild the task and the architecture."""
    architecture = architecture or BERT_FAMILY
    quiet_transformers()
    architecture.save(model, folder)
    tokenizer.save_pretrained(folder)
    info = {"task": task.name, "label_names": task.label_names, "max_length": max_length,
            "architecture": architecture.name, **(extra or {})}
    (Path(folder) / TASK_INFO).write_text(json.dumps(info, indent=2) + "\n")
    (Path(folder) / LABELS).write_text(json.dumps(task.label_names, indent=2) + "\n")


def load_stage_model(folder: Path):
    """(model, tokenizer, task info) from a teacher/ or student/ folder."""
    folder = Path(folder)
    if not (folder / TASK_INFO).is_file():
        raise ModelError(f"{folder} was not written by pocketbert (no {TASK_INFO}); train it with `pocketbert train`")
    info = read_task_info(folder)
    check_labels_agree(folder, info["label_names"], TASK_INFO)
    task = make_task(info["task"], info["label_names"])
    model = architecture_of(info).load(folder, task)
    model.eval()
    return model, load_tokenizer(str(folder)), task, info


def load_model_folder(folder: Path, task):
    """A model from a stage folder (its task info names the architecture) or a plain save_pretrained folder."""
    info = read_task_info(folder) if (Path(folder) / TASK_INFO).is_file() else {}
    return architecture_of(info).load(Path(folder), task)


def read_task_info(folder: Path) -> dict:
    """A stage folder's pocketbert_task.json, checked: the task, its label names (strings, each once; two or more
    for a classifier, none for spans) and the training length. An edited or damaged file is one ModelError line."""
    path = Path(folder) / TASK_INFO
    advice = f"re-run the stage that wrote {Path(folder).name}/ (with --overwrite)"
    info = read_json_object(path, ModelError, advice, "stage folder's task file")
    task, names = info.get("task"), info.get("label_names")
    if task not in TASKS:
        raise ModelError(f"{path}: 'task' must be one of {', '.join(TASKS)} (found {task!r}); {advice}")
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ModelError(f"{path}: 'label_names' must list each class name once; {advice}")
    if (task == "qa") != (not names) or len(names) == 1:
        raise ModelError(f"{path}: a {task} model with {len(names)} label names; {advice}")
    length = info.get("max_length")
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ModelError(f"{path}: 'max_length' must be a positive whole number (found {length!r}); {advice}")
    if not isinstance(info.get("architecture", ""), str):
        raise ModelError(f"{path}: 'architecture' must be a name; {advice}")
    return info


def read_labels(folder: Path) -> list[str]:
    """An export's labels.json: the class names in logit order (none for spans), which its config.json's id2label
    must give too."""
    names = _labels_file(Path(folder) / LABELS)
    check_labels_agree(folder, names, LABELS)
    return names


def _labels_file(path: Path) -> list[str]:
    advice = f"re-run the stage that wrote {path.parent.name}/ (with --overwrite)"
    names = read_json(path, ModelError, advice, "labels file")
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ModelError(f"{path}: must be a JSON list of class names, each once; {advice}")
    return names


def check_labels_agree(folder: Path, names: list[str], read_from: str) -> None:
    """The class names a folder's labels are read from (`read_from`) against the other files that state them:
    labels.json (an app reads it) and, for a classifier, config.json's id2label (transformers and hub tools read
    it). Two files naming the classes differently leave no way to tell which logit is which: one ModelError."""
    folder = Path(folder)
    advice = f"re-run the stage that wrote {folder.name}/ (with --overwrite)"
    stated = {}
    if read_from != LABELS and (folder / LABELS).is_file():
        stated[LABELS] = _labels_file(folder / LABELS)
    config = folder / MODEL_CONFIG
    if names and read_from != MODEL_CONFIG and config.is_file():
        id2label = read_json_object(config, ModelError, advice, "model config").get("id2label")
        if isinstance(id2label, dict):
            try:
                stated[f"{MODEL_CONFIG}'s id2label"] = [id2label[k] for k in sorted(id2label, key=int)]
            except (TypeError, ValueError):
                raise ModelError(f"{config}: id2label's keys must be class numbers; {advice}") from None
    for where, other in stated.items():
        if other != names:
            raise ModelError(f"{folder}: {where} names the classes {other}, {read_from} {names}; the labels of a "
                             f"model must agree wherever they are written: {advice}")

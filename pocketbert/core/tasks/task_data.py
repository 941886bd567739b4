"""A task's train and eval examples, from a named dataset (a local data folder, else the Hugging Face hub) or
any local file: the file formats are core/tasks/data.py's, and which reader a task's files take is the task's own
(core/tasks/registry.py), so this module sits above both.
"""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.tasks.data import (
    DATA_DIR_ENV,
    IMDB_EVAL_SIZE,
    NAMED_DATASETS,
    NamedDataset,
    TaskData,
    check_eval_file,
    default_data_dir,
    hold_out,
    read_passages,
)
from pocketbert.core.tasks.registry import TASK_CLASSES, check_task
from pocketbert.core.errors import ConfigError, DataError, require


def read_task_file(path: Path, task: str, label_names: list[str] | None):
    """(examples, label names) of a data file for the task."""
    return TASK_CLASSES[check_task(task)].read_file(Path(path), label_names)


def _hub_dataset(name: str, spec: NamedDataset) -> TaskData:
    datasets = require("datasets", "hub")
    try:
        ds = datasets.load_dataset(spec.hub_id)
    except Exception as exc:  # the hub client raises many types; all mean "not reachable"
        raise DataError(
            f"could not load '{name}' from the Hugging Face hub ({type(exc).__name__}); "
            f"point --data-dir (or {DATA_DIR_ENV}) at a folder holding {spec.train_file}"
        ) from exc

    task = TASK_CLASSES[spec.task]
    train, eval_examples = task.hub_examples(ds["train"]), task.hub_examples(ds[spec.hub_eval_split])
    task.check_separation(train, eval_examples, f"{spec.hub_id} train", f"{spec.hub_id} {spec.hub_eval_split}")
    return TaskData(name, spec.task, list(spec.label_names), train, eval_examples)


def load_task_data(
    dataset: str,
    task: str,
    data_dir: Path | None = None,
    eval_file: Path | None = None,
    label_names: list[str] | None = None,
    seed: int = 13,
) -> TaskData:
    """Resolve a named dataset or a local file into train and eval examples for `task`."""
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    if dataset in NAMED_DATASETS:
        spec = NAMED_DATASETS[dataset]
        if spec.task != task:
            raise ConfigError(f"dataset '{dataset}' is a {spec.task} dataset, not {task}: pass --task {spec.task}")
        if data_dir is None or not (data_dir / spec.train_file).is_file():
            if data_dir is not None:
                raise DataError(f"{data_dir / spec.train_file} does not exist; point --data-dir (or {DATA_DIR_ENV}) "
                                f"at the folder holding {spec.train_file}")
            return _hub_dataset(dataset, spec)
        names = list(spec.label_names) or None
        train_path = data_dir / spec.train_file
        train, names = read_task_file(train_path, task, names)
        sources = {"train": train_path}
        if eval_file is None and spec.eval_file is not None:
            eval_file = data_dir / spec.eval_file
        if eval_file is None:  # IMDb: hold out a fixed, seeded part of train
            kept, held = hold_out(train, IMDB_EVAL_SIZE, seed)
            return TaskData(dataset, task, names, kept, held, sources)
        check_eval_file(train_path, eval_file)
        eval_examples, _ = read_task_file(Path(eval_file), task, names)
        TASK_CLASSES[task].check_separation(train, eval_examples, str(train_path), str(eval_file))
        sources["eval"] = Path(eval_file)
        return TaskData(dataset, task, names, train, eval_examples, sources)

    path = Path(dataset)
    if not path.exists():
        raise ConfigError(
            f"unknown dataset '{dataset}': use one of {', '.join(NAMED_DATASETS)} or the path of a data file"
        )
    if eval_file is not None:
        check_eval_file(path, eval_file)
    train, names = read_task_file(path, task, label_names)
    sources = {"train": path}
    if eval_file is None:
        if len(train) < 2:
            raise DataError(f"{path} has a single example; training needs more, and an --eval-file")
        kept, held = hold_out(train, max(1, len(train) // 10), seed)
        return TaskData(path.stem, task, names, kept, held, sources)
    eval_examples, _ = read_task_file(Path(eval_file), task, names)
    TASK_CLASSES[task].check_separation(train, eval_examples, str(path), str(eval_file))
    sources["eval"] = Path(eval_file)
    return TaskData(path.stem, task, names, train, eval_examples, sources)


def transfer_passages(source: str, task_name: str, data_dir: Path | None, seed: int, column: str) -> list[str]:
    """The passages of one transfer source (transfer.data): a named dataset's training split (labels ignored), or
    a file of passages. The distillation labels them; a fitted export vocabulary is counted on them."""
    if source in NAMED_DATASETS:
        data = load_task_data(source, task_name, data_dir, None, None, seed)
        return [example.text for example in data.train]
    path = Path(source)
    if not path.exists():
        raise ConfigError(f"transfer data '{source}' is neither a file nor a dataset name "
                          f"({', '.join(NAMED_DATASETS)}): check the path")
    return read_passages(path, column)
